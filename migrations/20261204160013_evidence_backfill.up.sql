-- Turns that ran before turn_evidence existed have none, and would read
-- as drawing on nothing. What their journal says they read is theirs: the
-- documents their tools returned (tool_completed citations) and their
-- answer cites. What their history gave them was never journaled and
-- cannot be recovered; the turns that gave it are covered by this same
-- backfill wherever they read a document themselves.
INSERT INTO "turn_evidence" ("id", "conversation_id", "turn_id", "document_id")
SELECT gen_random_uuid(), e.conversation_id, e.turn_id, d.document_id
FROM "journal_entries" e
CROSS JOIN LATERAL (
  SELECT (regexp_match(c, '^doc:([0-9a-fA-F-]{36})'))[1]::uuid AS document_id
  FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(e.payload -> 'citations') = 'array' THEN e.payload -> 'citations' ELSE '[]' END) c
  WHERE e.kind = 'tool_completed'
  UNION
  SELECT (a ->> 'document')::uuid
  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(e.payload -> 'citations') = 'array' THEN e.payload -> 'citations' ELSE '[]' END) a
  WHERE e.kind = 'turn_answer' AND jsonb_typeof(a) = 'object' AND (a ->> 'document') ~ '^[0-9a-fA-F-]{36}$'
) d
WHERE e.turn_id IS NOT NULL AND e.kind IN ('tool_completed', 'turn_answer') AND d.document_id IS NOT NULL
ON CONFLICT DO NOTHING;
