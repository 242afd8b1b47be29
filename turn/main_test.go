package turn_test

import (
	"os"
	"testing"

	"github.com/turngate/turngate/authority"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/migrations"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

func authorityIdentity(email string) authority.Identity {
	return authority.Identity{Subject: "test|" + email, Email: email}
}
