package server

import (
	"net"
	"net/http"

	"github.com/turngate/turngate/graph"
	"github.com/turngate/turngate/graph/extension"
	"github.com/turngate/turngate/graph/generated"
	"github.com/turngate/turngate/journal"
)

// What the server's own tests (package server_test) read of an App's
// insides and of its unexported helpers.

var (
	Outgoing     = outgoing
	LoopbackOnly = loopbackOnly
)

func ParseBudgetOf(a *App) *extension.ParseBudget { return a.parseBudget }
func HubOf(a *App) *journal.Hub                   { return a.hub }
func SetDraining(a *App)                          { a.draining.Store(true) }
func OpsServerOf(a *App) *http.Server             { return a.opsServer() }
func ListenerOf(a *App) net.Listener              { return a.ln }

// WrapResolvers has c's App serve its resolvers through wrap.
func WrapResolvers(c *Config, wrap func(*graph.Resolver) generated.ResolverRoot) {
	c.wrapResolvers = wrap
}

// SettingNames lists the environment variables of ConfigFromEnv's table, in
// its order.
func SettingNames() []string {
	var c Config
	var names []string
	for _, s := range c.settings() {
		names = append(names, s.name)
	}
	return names
}
