// Package notify delivers the notifications of the outbox (dao.NotificationClaimDue): any
// master runs a Sender, which takes the rows due a batch at a time, skipping those another
// master holds, tries the batch's rows at once, each through its channel within
// notify.timeout, and records each result under the attempt that took it. It holds the rows
// for twice notify.timeout.
//
// A row is sent at least once. A master that dies mid-send leaves the row sending until its
// hold lapses; another master then sends it again, with the same Idempotency-Key header (a
// webhook) or Message-ID (a mail), so a receiver can drop the repeat. A failed try is retried
// after a backoff that doubles each time, with jitter, up to notify.max-backoff; after
// notify.max-attempts tries the row is dead, with its last error, for the Notifications page
// to show.
//
// A webhook is a JSON POST of Message (or {"text": ...} for a Slack one) to the URL in the
// environment variable the rule names, read when it is sent: the URL is never stored. A
// variable that is unset fails the try like a refused request, so setting it and restarting
// the masters delivers what is still due.
//
// A workflow's author names the variable and the webhook's target writes the answer, so
// neither is trusted: a variable whose name does not match notify.webhook-env-pattern is not
// read (the check at store can be older than the masters' config); no redirect is followed;
// no proxy is used; and unless notify.allow-private-targets is set, a connection to an
// address PrivateTarget names is refused when it is made, after the name was resolved. A
// try's error is stored for every viewer of the Notifications page, so it says the class of
// the failure or the status code, never the URL, an address or the target's words; the
// master's log has the cause.
package notify
