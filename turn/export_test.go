package turn

import (
	"context"

	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runtime"
)

// AdmitForTest admits a claimed turn's run and returns its callback host,
// so a test can present callbacks to it directly.
func AdmitForTest(ctx context.Context, r *Runner, c *lease.Claimed) (runtime.Callbacks, runtime.Contract, error) {
	h, contract, err := r.admit(ctx, c)
	if err != nil {
		return nil, contract, err
	}
	return h, contract, nil
}
