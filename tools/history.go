package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/authority"
)

// HistorySearch searches the finished turns of the conversations the
// member is a current member of — nothing else — by Postgres full-text
// search, best match first among the newest matches. A turn drawing on a
// document the member (or, in a shared room, any member of it) may not
// read now is not found.
type HistorySearch struct{}

// HistorySearchName is the tool's name.
const HistorySearchName = "history_search"

// Spec implements Tool.
func (HistorySearch) Spec() Spec {
	return Spec{
		Name:        HistorySearchName,
		Description: "Search earlier messages and answers in the conversations the member belongs to. Returns passages with citation ids.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words to search for"}},"required":["query"]}`),
	}
}

// Permission implements Tool: membership of the rooms searched is the
// gate, checked in the query itself.
func (HistorySearch) Permission() string { return "" }

const historyLimit = 5

// historyCandidates bounds the ranking: the best matches are chosen from
// the newest historyCandidates turns that match, so a query of common
// words ranks a few hundred turns, not every turn of a long room.
const historyCandidates = 200

// historyWalk is how many of the newest finished turns (of every room)
// the search walks, newest first, before it asks the full-text index.
const historyWalk = 2000

// searchHistory first settles the rooms the search may read — the
// member's rooms now, and in a shared room only those every member of its
// audience is in too — then finds the newest historyCandidates matching
// finished turns in them, and ranks those. Two ways find the same turns:
//
//   - walk: the newest historyWalk finished turns of every room, newest
//     first (turn_history_recent), testing each one's stored words
//     (search_tsv), stopping at historyCandidates matches in the rooms.
//     When it finds that many they are the newest matches there are: any
//     other match is older than every turn walked. Common words end the
//     walk within a few hundred turns.
//   - indexed, only when the walk found fewer: the full-text index
//     (turn_history_search) finds every match in the rooms, and the
//     newest historyCandidates of them are kept. For words that are
//     rare, or rooms that are quiet among many, the matches are few.
//
// Of those candidates, a turn is a hit only when the member may read all
// of its evidence now and, in a shared room, so may every current member
// of it (the evidence rule): the rule is applied to the few hundred
// candidates, never to the room's every turn. Each hit comes with its
// evidence, which becomes the searching turn's.
var searchHistory = `
WITH rooms AS (
  SELECT rm.conversation_id FROM room_members rm
  WHERE rm.member_id = $1
    AND ($5::uuid IS NULL OR ` + authority.AudienceSharesRoomSQL("$5", "rm.conversation_id") + `)),
walk AS (
  SELECT w.id, w.conversation_id, w.created_at
  FROM (SELECT t.id, t.conversation_id, t.created_at, t.search_tsv FROM turns t
        WHERE t.state = 'completed'
        ORDER BY t.created_at DESC
        LIMIT ` + fmt.Sprint(historyWalk) + `) w
  WHERE w.conversation_id = ANY (ARRAY(SELECT conversation_id FROM rooms))
    AND w.id <> $3
    AND w.search_tsv @@ websearch_to_tsquery('simple', $2)
  ORDER BY w.created_at DESC
  LIMIT ` + fmt.Sprint(historyCandidates) + `),
indexed AS (
  SELECT t.id, t.conversation_id, t.created_at
  FROM turns t
  WHERE (SELECT count(*) FROM walk) < ` + fmt.Sprint(historyCandidates) + `
    AND t.conversation_id = ANY (ARRAY(SELECT conversation_id FROM rooms))
    AND t.state = 'completed' AND t.id <> $3
    AND t.search_tsv @@ websearch_to_tsquery('simple', $2)
  ORDER BY t.created_at DESC
  LIMIT ` + fmt.Sprint(historyCandidates) + `),
hits AS (
  SELECT * FROM walk WHERE (SELECT count(*) FROM walk) >= ` + fmt.Sprint(historyCandidates) + `
  UNION ALL
  SELECT * FROM indexed)
SELECT h.id, c.title, t.input, coalesce(t.answer, ''),
  ARRAY(SELECT ev.document_id FROM turn_evidence ev WHERE ev.conversation_id = h.conversation_id AND ev.turn_id = h.id)
FROM hits h
JOIN turns t ON t.conversation_id = h.conversation_id AND t.id = h.id
JOIN conversations c ON c.id = h.conversation_id
WHERE ` + authority.TurnReadableSQL("h.conversation_id", "h.id", "$1") + `
  AND ($5::uuid IS NULL OR ` + authority.TurnAudienceReadableSQL("h.conversation_id", "h.id", "$5") + `)
ORDER BY ts_rank(t.search_tsv, websearch_to_tsquery('simple', $2)) DESC, h.created_at DESC
LIMIT $4`

// Run implements Tool.
func (HistorySearch) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		Query string `json:"query"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(args.Query) == "" {
		return Result{}, fmt.Errorf("%w: query is empty", ErrBadArguments)
	}
	// Any of the words may match; the best matches rank first.
	words := strings.FieldsFunc(args.Query, notWordRune)
	if len(words) == 0 {
		return Result{}, fmt.Errorf("%w: query has no words", ErrBadArguments)
	}
	query := strings.Join(words, " or ")
	rows, err := call.DB.QueryContext(ctx, searchHistory, call.Actor.MemberID, query, call.Actor.TurnID, historyLimit, call.Actor.audience())
	if err != nil {
		return Result{}, fmt.Errorf("history search: %w", err)
	}
	defer rows.Close()
	var res Result
	var b strings.Builder
	for rows.Next() {
		var id uuid.UUID
		var title, input, answer string
		var evidence pq.StringArray
		if err := rows.Scan(&id, &title, &input, &answer, &evidence); err != nil {
			return Result{}, err
		}
		if err := res.derivesFrom(evidence); err != nil {
			return Result{}, err
		}
		cite := fmt.Sprintf("turn:%s", id)
		passage := clip(oneLine(input), 200)
		if answer != "" {
			passage += " — answered: " + clip(oneLine(answer), 200)
		}
		res.Citations = append(res.Citations, Citation{ID: cite, Source: title, Passage: passage})
		fmt.Fprintf(&b, "[%s] (%s) %s\n", cite, title, passage)
	}
	if err := rows.Err(); err != nil {
		return Result{}, err
	}
	if len(res.Citations) == 0 {
		res.Content = "No earlier messages match."
		return res, nil
	}
	res.Content = b.String()
	return res, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
