package extension

import "testing"

// TestParseBudgetShares: requests without an identity hold at most a
// quarter of the budget, members all of it; a document heavier than what
// it may take at all takes all of that, and is not refused for ever.
func TestParseBudgetShares(t *testing.T) {
	t.Parallel()
	b := NewParseBudget(1000)
	anon, ok := b.TryAcquire(250, true)
	if !ok {
		t.Fatal("a quarter, anonymous: refused")
	}
	if _, ok := b.TryAcquire(1, true); ok {
		t.Fatal("past the anonymous quarter: taken")
	}
	member, ok := b.TryAcquire(750, false)
	if !ok {
		t.Fatal("the other three quarters, a member: refused")
	}
	if _, ok := b.TryAcquire(1, false); ok {
		t.Fatal("past the budget: taken")
	}
	anon()
	member()
	heavy, ok := b.TryAcquire(1<<40, false)
	if !ok {
		t.Fatal("heavier than the budget, with the budget free: refused")
	}
	if _, ok := b.TryAcquire(1, true); ok {
		t.Fatal("the budget is all taken, yet an anonymous document took some")
	}
	heavy()
	heavyAnon, ok := b.TryAcquire(1<<40, true)
	if !ok {
		t.Fatal("heavier than the anonymous quarter, with it free: refused")
	}
	if release, ok := b.TryAcquire(750, false); !ok {
		t.Fatal("a member, with only the anonymous quarter taken: refused")
	} else {
		release()
	}
	heavyAnon()
}
