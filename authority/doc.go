// Package authority decides who a request acts for and what a turn may do.
//
// # The identity envelope
//
// Every request names its caller with an identity envelope: a compact JWT,
// signed with Ed25519 (alg EdDSA) by the platform that authenticated the
// user, carried in one HTTP header (X-Turngate-Identity unless configured
// otherwise). A [Verifier] accepts an envelope only if its signature is
// valid under the configured public key, its issuer and audience are the
// configured ones, it carries an expiry that has not passed (nbf and iat,
// when present, must not lie in the future), its subject is set, and it
// asserts a syntactically valid email with email_verified set to true.
// What it says about the caller becomes an [Identity]: the platform user id,
// the lowercased email (the document-ACL principal) and a display name
// flattened to one bounded line, which is a label and confers nothing.
//
// [Middleware] verifies the header on every request, before any handler
// runs, and puts the result into the request context: the identity when
// the envelope is valid, the precise verification failure when it is not,
// neither when the header is absent. Resolvers call [RequireIdentity] (or
// [Members.Current]) and answer UNAUTHENTICATED with the reason when there
// is no identity. Errors carry reasons that are safe to show, such as
// "identity envelope expired"; see [AuthError].
//
// # Key sets
//
// Instead of one key, an identity provider's key set (JWKS) may sign
// envelopes ([KeySet]); each envelope then names its key by kid, and one
// without a kid is refused — trying every key would accept an envelope no
// key claims. The set is read at start, every refresh interval, and at
// once for an unknown kid (at most once a second, one read shared by every
// envelope waiting), so a rotated-in key verifies from its first envelope
// while invented kids cannot make the server hammer the provider. A key
// the provider withdraws stops verifying at the next read that no longer
// finds it: the memory of verified envelopes is keyed by the set's
// version. [VerifierConfig.MaxLifetime] bounds exp from iat, so a leaked
// envelope cannot serve for months. Each refusal names the check that
// failed (no kid, unknown key, a key of another algorithm, lifetime,
// expired, ...) and never echoes the envelope.
//
// # Why identity comes only from the header
//
// Identity is never read from a request body, GraphQL variables, a
// WebSocket connection_init payload or a query string. Those are written by
// whatever code composes the request, including code that relays other
// people's input (an agent, a shared link, a pasted query); the header is
// transport metadata that the platform in front of turngate controls.
// A single source also leaves no precedence rules to get wrong: an
// envelope in a payload can never override or stand in for the header,
// and an identity can never change in the middle of a connection. A
// WebSocket upgrade is an ordinary HTTP request, so it passes through the
// same middleware, and the identity verified at the upgrade is the
// identity of every operation on that connection. Query strings also end
// up in access logs and browser history, where a bearer credential must
// not be.
//
// # Dev mode
//
// Without a platform, the server keeps an Ed25519 key in its data folder
// ([LoadOrCreateDevKey]); `turngate token` mints envelopes with the same
// key through a [Signer], and [DevSubject] gives demo users deterministic
// platform user ids.
//
// # The authorization rules
//
// Every authorization predicate is written here once, as a Go function
// and, where a query must apply it inside the database, as the one SQL
// fragment every such query embeds; no other package writes its own
// (predicate.go):
//
//   - room membership, now: [IsMember], [MemberSQL];
//   - a turn is visible to its room's current members and to no one else
//     (NOT_FOUND, as for a turn that does not exist): [TurnVisible];
//   - who may steer, cancel or decide the approvals of a turn — its author,
//     or the owner of a shared room: [MayCommand];
//   - the document ACL, read when the document is, keyed by [Principal]
//     (the email lowercased in ASCII only, [LowerASCII]):
//     [DocumentReadableSQL], [ReadableDocuments];
//   - the permission every read of documents needs besides the ACL:
//     [MayReadDocuments] ([PermissionDocumentsRead]);
//   - in a shared room, evidence only the whole audience may read: a
//     document every current member may read, [AudienceReadableSQL]; a
//     conversation every member is in, [AudienceSharesRoomSQL];
//   - a turn's evidence (every document its text may derive from), for
//     one viewer, [TurnReadableSQL], and for a model context built for a
//     room's audience, [TurnAudienceReadableSQL];
//   - artifact visibility (its owner, or a current member of a room that
//     holds a reference, who may read the evidence of the turn that made
//     it): [ArtifactReadableSQL];
//   - a permission held at the moment a tool runs: [Holds].
//
// The authority bundle a turn is pinned to is resolved in one place,
// [ResolveBundle], from the row [BundleColumns] reads in the accepting
// statement.
//
// # What it must not import
//
// authority sits below every package that acts for a member: it imports
// errcode, pg, ent and internal/startstop (KeySet's lifecycle),
// never turn, lease, runner, callback, tools, room, graph or server.
package authority
