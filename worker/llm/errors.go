package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/tmc/langchaingo/llms"
)

// Class is the kind of a failed model call; it decides whether the call is retried.
type Class string

// The classes of failure.
const (
	// ClassRateLimit: HTTP 429. Retried, after Retry-After when the provider gives one.
	ClassRateLimit Class = "rate_limit"
	// ClassServer: HTTP 5xx, or an answer that was not one. Retried.
	ClassServer Class = "server_error"
	// ClassTimeout: the request outlasted the provider's timeout. Retried.
	ClassTimeout Class = "timeout"
	// ClassNetwork: the server could not be reached or dropped the connection. Retried.
	ClassNetwork Class = "network"
	// ClassBadRequest: HTTP 400, 404, 422 and the like: the request itself is wrong (an
	// unknown model, a prompt too long). Not retried.
	ClassBadRequest Class = "bad_request"
	// ClassAuth: HTTP 401 or 403: a wrong or missing API key. Not retried.
	ClassAuth Class = "auth"
	// ClassConfig: the provider cannot be used as configured (an unknown provider, an unset
	// API key variable). Not retried.
	ClassConfig Class = "config"
	// ClassAdmission: the database refused the statement that admits a request under the
	// provider's limits (a database that cannot be reached is waited for instead). Nothing
	// was sent. Not retried.
	ClassAdmission Class = "admission"
)

// Retryable reports whether a call that failed this way may succeed if sent again.
func (c Class) Retryable() bool {
	switch c {
	case ClassRateLimit, ClassServer, ClassTimeout, ClassNetwork:
		return true
	}
	return false
}

// Error is a failed model call.
type Error struct {
	Provider string
	Class    Class
	// Status is the HTTP status of the last response, 0 when there was none.
	Status int
	// Attempts is how many times the call was tried.
	Attempts int
	Msg      string
	Err      error
}

// Error says which provider failed how, after how many tries, and what it answered.
func (e *Error) Error() string {
	s := fmt.Sprintf("llm provider %q: %s", e.Provider, strings.ReplaceAll(string(e.Class), "_", " "))
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Unwrap returns the library's error.
func (e *Error) Unwrap() error { return e.Err }

// statusInMessage finds the status in messages such as langchaingo's "API returned
// unexpected status code: 429: ...", for a transport that did not record it.
var statusInMessage = regexp.MustCompile(`status code: (\d{3})`)

// classify decides the class of a failed call from what the transport saw first, then
// from the error's type, then from the library's message.
func classify(provider string, err error, info *callInfo) *Error {
	e := &Error{Provider: provider, Status: info.status, Err: err, Msg: err.Error()}
	if e.Status == 0 {
		if m := statusInMessage.FindStringSubmatch(e.Msg); m != nil {
			e.Status, _ = strconv.Atoi(m[1])
		}
	}
	var netErr net.Error
	var llmErr *llms.Error
	switch {
	case e.Status == 401 || e.Status == 403:
		e.Class = ClassAuth
	case e.Status == 429:
		e.Class = ClassRateLimit
	case e.Status >= 500:
		e.Class = ClassServer
	case e.Status == 408:
		e.Class = ClassTimeout
	case e.Status >= 400:
		e.Class = ClassBadRequest
	case info.timedOut || errors.Is(err, context.DeadlineExceeded):
		e.Class = ClassTimeout
		e.Msg = "no answer within the provider's timeout"
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.As(err, &netErr):
		e.Class = ClassNetwork
	case errors.As(err, &llmErr):
		e.Class = classOfLibraryCode(llmErr.Code)
	case info.status >= 200 && info.status < 300:
		// An answer arrived but could not be read: a broken or cut-off body.
		e.Class = ClassServer
	default:
		e.Class = ClassNetwork
	}
	return e
}

func classOfLibraryCode(code llms.ErrorCode) Class {
	switch code {
	case llms.ErrCodeAuthentication:
		return ClassAuth
	case llms.ErrCodeRateLimit, llms.ErrCodeQuotaExceeded:
		return ClassRateLimit
	case llms.ErrCodeTimeout:
		return ClassTimeout
	case llms.ErrCodeProviderUnavailable:
		return ClassServer
	case llms.ErrCodeInvalidRequest, llms.ErrCodeResourceNotFound, llms.ErrCodeTokenLimit,
		llms.ErrCodeContentFilter, llms.ErrCodeNotImplemented:
		return ClassBadRequest
	}
	return ClassServer
}
