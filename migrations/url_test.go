package migrations_test

import (
	"net/url"
	"testing"
)

// replaceDB returns dsn naming database name instead.
func replaceDB(t *testing.T, dsn, name string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
