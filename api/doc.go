// Package api is zksched's HTTP interface, served by every master on master.port: the JSON
// API under /api/v1 (described by its OpenAPI document, /api/v1/openapi.json), the web UI
// (server-rendered html/template pages whose templates, CSS and script are embedded in the
// binary), and /metrics, /healthz and /readyz. Workers serve the last three through
// NodeHandler.
//
// Every master serves the same thing from the same database, so a load balancer may spread
// users over them: nothing is kept in a master's memory between requests but the users file
// it reads. Sessions are rows of api_session, the CSRF token is a double-submitted cookie,
// and the cluster view is read from ZooKeeper at each request.
//
// # Authentication and roles
//
// The users are api.token's, an admin named "admin", and those of api.users-file, each with
// a role (viewer, operator, admin) and the SHA-256 of a token; the file is read again within
// a second of a change. Every API call needs "Authorization: Bearer <token>" (or the UI's
// session cookie) and every page a session, got from the login form; /healthz, /readyz,
// /metrics, /login, the static files and the OpenAPI document (no data) are open, and so are
// webhook deliveries (POST /api/v1/hooks/{name}, hooks.go), whose signature made with their
// hook's secret is their credential. A session is a random cookie whose hash
// is a row of api_session: a logout revokes the row, so a copied cookie stops working on
// every master, and a session ends with its user's token (a user removed from the file, a
// token changed). A wrong token counts against its client address, which after a handful
// is answered 429 with Retry-After, the right token included, until the bucket refills.
//
// The route table (routes) gives every route the least role that may use it: a viewer
// reads; an operator also kills, reruns and stops instances, enables, disables and
// triggers schedules, and runs a stored definition from its page in the UI; an admin also
// stores definitions and submits instances through the API. Others get 403, and the UI
// shows only the actions its user may take. A server needs a token or a
// users file; only with Config.AllowUnauthenticated (api.allow-unauthenticated) is everything
// open to everyone as an admin (cmd/zksched decides where it listens, and gives a master
// without either a token it generates).
//
// Every request's Host must be a name of the master (node.host, the loopback names, the
// hostname, api.allowed-hosts), or it is refused with 421: a page whose DNS name is rebound
// to a master's address cannot use a browser inside the network to reach it.
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
// (the message names it), 401 without a valid token, 403 for a cross-origin request or a role
// too low, 404,
// 405, 409 when the instance's state does not allow the action (killing a finished task),
// 413 for a body over the limit, 415 for a body of the wrong type, 421 for another Host, 429
// after too many wrong tokens, 500 otherwise.
package api
