package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Document is a source the retrieval tools search. Who may read it is its
// ACL: document_acls rows naming lowercased verified emails.
type Document struct{ ent.Schema }

func (Document) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}, createdMixin{}} }

func (Document) Fields() []ent.Field {
	return []ent.Field{
		field.String("title").NotEmpty(),
		field.Text("body"),
		// sha256 of the body, hex: citations carry it.
		field.String("digest").NotEmpty(),
	}
}

func (Document) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("acl", DocumentACL.Type),
		edge.To("passages", Passage.Type),
	}
}

// DocumentACL grants one principal (a lowercased verified email) read
// access to one document.
type DocumentACL struct{ ent.Schema }

func (DocumentACL) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}} }

func (DocumentACL) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("document_id", uuid.UUID{}).Immutable(),
		field.String("principal").NotEmpty().Immutable(),
	}
}

func (DocumentACL) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("document", Document.Type).Ref("acl").Field("document_id").Unique().Required().Immutable(),
	}
}

func (DocumentACL) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("document_id", "principal").Unique(),
		index.Fields("principal", "document_id"),
	}
}

func (DocumentACL) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Table("document_acls"),
		entsql.Checks(map[string]string{"document_acls_principal_lower": "principal = lower(principal)"}),
	}
}

// Passage is one searchable passage of a document. Its tsv column is kept
// by a trigger (migrations) and indexed with GIN.
type Passage struct{ ent.Schema }

func (Passage) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{}} }

func (Passage) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("document_id", uuid.UUID{}).Immutable(),
		field.Int("ordinal").NonNegative().Immutable(),
		field.Text("text").Immutable(),
		field.String("tsv").Optional().
			SchemaType(map[string]string{dialect.Postgres: "tsvector"}),
	}
}

func (Passage) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("document", Document.Type).Ref("passages").Field("document_id").Unique().Required().Immutable(),
	}
}

func (Passage) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("document_id", "ordinal").Unique(),
		index.Fields("tsv").Annotations(entsql.IndexType("GIN")),
	}
}
