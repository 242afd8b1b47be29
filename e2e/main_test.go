package e2e

import (
	"os"
	"testing"

	"github.com/turngate/turngate/internal/e2etest"
)

func TestMain(m *testing.M) {
	code := e2etest.Main(m)
	closeChromium()
	os.Exit(code)
}

const (
	alice   = "alice@example.com"
	bob     = "bob@example.com"
	mallory = "mallory@example.com"
)
