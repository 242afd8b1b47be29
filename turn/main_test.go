package turn_test

import (
	"os"
	"testing"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/migrations"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }
