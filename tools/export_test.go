package tools

import "strings"

// HistorySearchSQL is the statement HistorySearch runs for actor and
// query, with its arguments, for a benchmark to read its plan.
func HistorySearchSQL(actor Actor, query string) (string, []any) {
	words := strings.Join(strings.FieldsFunc(query, notWordRune), " or ")
	return searchHistory, []any{actor.MemberID, words, actor.TurnID, historyLimit, actor.audience()}
}
