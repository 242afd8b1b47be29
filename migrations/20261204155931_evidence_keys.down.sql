ALTER TABLE "turn_evidence" DROP CONSTRAINT "turn_evidence_turns_evidence";
ALTER TABLE "turn_evidence" DROP CONSTRAINT "turn_evidence_pkey", ADD PRIMARY KEY ("id");
