package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/zksched/zksched/dao"
)

// httpError is an error with the status code it answers with. Its message is shown to the
// client, so it must not leak internals: those stay in the log.
type httpError struct {
	status int
	msg    string
	// err, unless nil, is the error msg tells of, for a page that shows it in parts (the
	// run form shows each param's problem beside its field).
	err error
}

func (e *httpError) Error() string { return e.msg }

func (e *httpError) Unwrap() error { return e.err }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return errorf(http.StatusBadRequest, format, args...)
}

// classify maps an error to its status code and the message the client sees.
func classify(err error) (int, string) {
	var he *httpError
	var ce *dao.ConflictError
	var mbe *http.MaxBytesError
	var nf *notFoundError
	var taken *dao.HookTakenError
	switch {
	case errors.As(err, &he):
		return he.status, he.msg
	case errors.As(err, &nf):
		return http.StatusNotFound, nf.Error()
	case errors.As(err, &ce):
		return http.StatusConflict, ce.Error()
	case errors.As(err, &taken):
		return http.StatusConflict, "the workflow file is rejected, nothing stored: " + taken.Error()
	case errors.Is(err, dao.ErrInstanceNotFound), errors.Is(err, dao.ErrNoSchedule):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, dao.ErrWorkflowFull):
		return http.StatusConflict, err.Error()
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over the limit of %d bytes", mbe.Limit)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "the request was cancelled or timed out"
	case dao.IsUnavailable(err):
		return http.StatusServiceUnavailable, "the database is not reachable"
	}
	return http.StatusInternalServerError, "internal error; the master's log has the details"
}

// errorBody is the JSON of every API error.
type errorBody struct {
	Error struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

// maxErrorMessage bounds the message of an error answer. The messages that quote a request
// (a workflow file's problems) are bounded where they are made; this keeps any answer to a
// bad request small, whatever made it.
const maxErrorMessage = 32 << 10

// writeError answers an API request with err as JSON and logs server-side failures. The
// message is written without HTML escaping, which would make each '<' of a quoted value six
// bytes: the answer is JSON served with nosniff, never read as HTML.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = s.explainMissing(r.Context(), err)
	status, msg := classify(err)
	logFailure(r, status, err)
	if len(msg) > maxErrorMessage {
		msg = strings.ToValidUTF8(msg[:maxErrorMessage], "") + "…"
	}
	var body errorBody
	body.Error.Status, body.Error.Message = status, msg
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
}

// logFailure logs a server-side failure at error level. A heavy read refused for want of a
// place is no failure of the master's: it is counted (Server.Busy) and its request logged at
// info, so that a flood of them does not flood the log at error level too.
func logFailure(r *http.Request, status int, err error) {
	if info := infoOf(r); info != nil && info.busy {
		return
	}
	if status >= 500 {
		logFor(r).Error().Err(err).Msg("request failed")
	}
}

// writeJSON writes v as the response body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
