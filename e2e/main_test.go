package e2e

import (
	"os"
	"testing"

	"github.com/turngate/turngate/internal/e2etest"
)

func TestMain(m *testing.M) {
	os.Exit(e2etest.Main(closingChromium{m}))
}

// closingChromium runs the tests, then stops the package's Chromium: before
// the check that every goroutine a test started has ended.
type closingChromium struct{ m *testing.M }

func (c closingChromium) Run() int {
	defer closeChromium()
	return c.m.Run()
}

const (
	alice   = "alice@example.com"
	bob     = "bob@example.com"
	mallory = "mallory@example.com"
)
