DROP TRIGGER IF EXISTS artifacts_immutable ON artifacts;
DROP TRIGGER IF EXISTS room_resources_immutable ON room_resources;
DROP TRIGGER IF EXISTS passages_tsv ON passages;
DROP FUNCTION IF EXISTS turngate_passage_tsv();
