// Package layering holds the rules of every doc.go's "What it must not
// import" section as one table, and a test that checks them against the
// real import graph.
//
// A package's doc.go says, in prose, what it imports and what it never
// does; layering_test.go says the same as a row of its table — the
// module's packages it may import, what it must not reach even through
// another package, and who may import it — and reads the graph from one
// `go list -deps` over the module. The test fails naming the package, the
// forbidden import and the chain that reaches it. It also fails when a
// doc.go has such a section and no row, or a row has no section, so the
// prose and the rules change together: change one, change the other in the
// same commit.
//
// readme_test.go holds the README's "What is where" to the same account:
// every top-level directory with a package has its row, and every package
// under internal/ and clients/ is named there.
//
// The package has no code of its own; only its tests.
//
// # What it must not import
//
// Nothing of this module: it reads the graph from go list, not by
// importing what it checks.
package layering
