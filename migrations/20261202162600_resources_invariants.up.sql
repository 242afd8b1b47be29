-- Hand-written invariants of documents and room resources.

-- A passage's search vector is the database's own: kept from its text by a
-- trigger, whatever wrote the row.
CREATE FUNCTION turngate_passage_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.tsv := to_tsvector('english', NEW.text);
  RETURN NEW;
END;
$$;

CREATE TRIGGER passages_tsv
  BEFORE INSERT OR UPDATE OF text ON passages
  FOR EACH ROW EXECUTE FUNCTION turngate_passage_tsv();

-- A room resource is an immutable reference (room, artifact, digest), and
-- an artifact's bytes never change under the references to them.
CREATE TRIGGER room_resources_immutable
  BEFORE UPDATE OR DELETE ON room_resources
  FOR EACH ROW EXECUTE FUNCTION turngate_refuse_update();

CREATE TRIGGER artifacts_immutable
  BEFORE UPDATE ON artifacts
  FOR EACH ROW EXECUTE FUNCTION turngate_refuse_update();
