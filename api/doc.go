// Package api is zksched's HTTP interface, served by every master on master.port: the JSON
// API under /api/v1, the web UI (server-rendered html/template pages whose templates, CSS and
// script are embedded in the binary), and /metrics, /healthz and /readyz. Workers serve the
// last three through NodeHandler.
//
// Every master serves the same thing from the same database, so a load balancer may spread
// users over them: nothing is kept in a master's memory between requests. The session cookie
// is signed with a key derived from the token, the CSRF token is a double-submitted cookie,
// and the cluster view is read from ZooKeeper at each request.
//
// # Authentication
//
// With api.token (or api.token-file) set, every API call needs "Authorization: Bearer
// <token>" (or the UI's session cookie) and every page a session, got from the login form.
// /healthz, /readyz, /metrics, /login and the static assets are open. Without a token
// everything is open: bind the masters to a private network.
//
// # Cross-site requests
//
// Every state-changing request (POST) passes net/http's CrossOriginProtection, which refuses
// a browser's cross-origin request by its Sec-Fetch-Site and Origin headers; UI forms also
// carry a CSRF token that must match a cookie. Tools such as curl send neither header and are
// let through, so the API works from scripts.
//
// # Audit trail
//
// Every route that changes something (storing a definition, submitting, killing, rerunning,
// stopping, switching and triggering schedules) is registered through Server.audited and
// writes its audit_event row in the transaction of the change (audit.go), naming the
// request's principal, its role, the client's address and the target. A change refused with
// a 4xx other than 401 leaves a row of its own, outcome "refused: …". GET
// /api/v1/audit-events and the Audit page read the trail; no route writes it.
//
// # Errors
//
// API errors are JSON, {"error": {"status": 404, "message": "task instance 7 not found"}},
// with the status code that fits: 400 for a malformed id, an unknown filter or a bad value
// (the message names it), 401 without a valid token, 403 for a cross-origin request, 404,
// 405, 409 when the instance's state does not allow the action (killing a finished task),
// 413 for a body over the limit, 415 for a body of the wrong type, 500 otherwise.
package api
