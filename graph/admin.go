package graph

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/turngate/turngate/admin"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/model"
)

// adminPage reads an admin listing's first and after: 1 to 500, and an
// offset cursor of kind.
func adminPage(kind string, first *int64, after *string) (n, offset int, err error) {
	n = 100
	if first != nil {
		n = int(*first)
	}
	if n < 1 || n > admin.MaxListLength {
		return 0, 0, errcode.Invalid("first", "first is 1 to %d", admin.MaxListLength)
	}
	if after != nil {
		offset, err = cursorOffset(kind, *after)
	}
	return n, offset, err
}

// adminPageInfo is the page info of an offset page of got items (one more
// than first was read, to tell whether more follow).
func adminPageInfo(kind string, offset, first, got int) *model.PageInfo {
	info := &model.PageInfo{HasNextPage: got > first, HasPreviousPage: offset > 0}
	if n := min(got, first); n > 0 {
		start, end := offsetCursor(kind, offset), offsetCursor(kind, offset+n-1)
		info.StartCursor, info.EndCursor = &start, &end
	}
	return info
}

func parseUUID(field, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, errcode.Invalid(field, "%s is not a UUID", field)
	}
	return id, nil
}

func toAdminDocument(d *admin.Document) *model.AdminDocument {
	readers := d.Readers
	if readers == nil {
		readers = []string{}
	}
	return &model.AdminDocument{ID: d.ID.String(), Title: d.Title, Digest: d.Digest, Readers: readers, Passages: int64(d.Passages), CreatedAt: d.CreatedAt}
}

func toAdminMember(m *admin.Member) *model.AdminMember {
	return &model.AdminMember{ID: m.ID.String(), Email: m.Email, DisplayName: m.DisplayName, Permissions: m.Permissions, Groups: m.Groups}
}

func toAdminEvent(e *admin.Event) *model.AdminEvent {
	return &model.AdminEvent{ID: e.ID.String(), ActorID: e.ActorID.String(), Area: model.AdminArea(strings.ToUpper(e.Area)),
		Action: e.Action, Subject: e.Subject, Detail: model.JSON(e.Detail), At: e.At}
}

func toAdminAgent(a *admin.Agent) (*model.AdminAgent, error) {
	out := &model.AdminAgent{ID: a.ID.String(), Slug: a.Slug, Name: a.Name, Versions: make([]*model.AgentVersion, len(a.Versions))}
	for i, v := range a.Versions {
		mv, err := toAgentVersion(v)
		if err != nil {
			return nil, err
		}
		out.Versions[i] = mv
	}
	return out, nil
}

func toAgentVersion(v *ent.AgentVersion) (*model.AgentVersion, error) {
	budgets, err := json.Marshal(v.Budgets)
	if err != nil {
		return nil, fmt.Errorf("agent version budgets: %w", err)
	}
	if v.Budgets == nil {
		budgets = []byte("{}")
	}
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return &model.AgentVersion{ID: v.ID.String(), Version: int64(v.Version), Controller: v.Controller, ModelRoute: v.ModelRoute,
		Effort: v.Effort, SystemPrompt: v.SystemPrompt, Tools: nonNil(v.Tools), Specialists: nonNil(v.Specialists), Budgets: model.JSON(budgets)}, nil
}

func fromVersionInput(in *model.AgentVersionInput) (admin.VersionInput, error) {
	v := admin.VersionInput{Controller: in.Controller, ModelRoute: in.ModelRoute, Tools: in.Tools, Specialists: in.Specialists}
	if in.Effort != nil {
		v.Effort = *in.Effort
	}
	if in.SystemPrompt != nil {
		v.SystemPrompt = *in.SystemPrompt
	}
	if len(in.Budgets) > 0 && string(in.Budgets) != "null" {
		if err := json.Unmarshal(in.Budgets, &v.Budgets); err != nil {
			return v, errcode.Invalid("budgets", "budgets is an object of whole numbers")
		}
	}
	return v, nil
}

// adminAgentResult maps an admin agent answer.
func adminAgentResult(a *admin.Agent, err error) (*model.AdminAgent, error) {
	if err != nil {
		return nil, err
	}
	return toAdminAgent(a)
}

func adminMemberResult(m *admin.Member, err error) (*model.AdminMember, error) {
	if err != nil {
		return nil, err
	}
	return toAdminMember(m), nil
}

func adminDocumentResult(d *admin.Document, err error) (*model.AdminDocument, error) {
	if err != nil {
		return nil, err
	}
	return toAdminDocument(d), nil
}
