package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/retry"
	"github.com/zksched/zksched/workflow"
)

// Config configures a Sender.
type Config struct {
	// MaxAttempts is how many tries a notification gets before it is dead.
	MaxAttempts int
	// Timeout bounds one try.
	Timeout time.Duration
	// Backoff is the wait before the first retry; each further one waits twice the last, up
	// to MaxBackoff, plus up to a fifth of it at random.
	Backoff, MaxBackoff time.Duration
	// PublicURL is the web UI's address; the instance's page under it is a message's url.
	// Empty: no url.
	PublicURL string
	// PollInterval is how often the Sender looks for rows due.
	PollInterval time.Duration
	// Getenv reads the webhooks' variables; nil is os.Getenv.
	Getenv func(string) string
	// WebhookEnvPattern is notify.webhook-env-pattern, the glob (path.Match) a webhook's
	// variable must match to be read, checked again here because the masters' config may
	// have changed since the workflow was stored. Empty is workflow.DefaultWebhookEnvPattern.
	WebhookEnvPattern string
	// AllowPrivateTargets is notify.allow-private-targets: webhooks may connect to the
	// addresses PrivateTarget refuses otherwise.
	AllowPrivateTargets bool
	// Mailer sends the mails; nil fails them ("email is not configured").
	Mailer Mailer
	// Clock is the time source of the polls; nil is the real clock.
	Clock clockwork.Clock
	// Jitter returns a number in [0, 1) to spread the retries; nil is math/rand.
	Jitter func() float64
	Log    zerolog.Logger
	// Counted is told the result of each try, sent, failed (to be retried) or dead, one
	// call at a time; nil counts nothing.
	Counted func(result string)
}

// Mailer sends one mail of a notification.
type Mailer interface {
	Send(ctx context.Context, to string, msg Message, idempotencyKey string) error
}

// Message is what a notification says, the JSON body of a webhook and the content of a mail.
type Message struct {
	Event    string `json:"event"`
	Workflow string `json:"workflow,omitempty"`
	Instance int64  `json:"instance,omitempty"`
	Task     string `json:"task,omitempty"`
	TaskID   int64  `json:"task_instance,omitempty"`
	State    string `json:"state"`
	// EndReason is why the instance or task ended when something other than its own result
	// ended it (dao.EndReason, such as "timeout"); empty otherwise.
	EndReason string    `json:"end_reason,omitempty"`
	Error     string    `json:"error"`
	URL       string    `json:"url,omitempty"`
	Time      time.Time `json:"time"`
	Node      string    `json:"node,omitempty"`
}

// Text is the message as one line, the text of a Slack body and the subject of a mail.
func (m Message) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "zksched %s", m.Event)
	switch {
	case m.Node != "":
		fmt.Fprintf(&b, ": node %s", m.Node)
	case m.Workflow != "":
		fmt.Fprintf(&b, ": workflow %s instance %d", m.Workflow, m.Instance)
		if m.Task != "" {
			fmt.Fprintf(&b, " task %s", m.Task)
		}
	}
	fmt.Fprintf(&b, " is %s", m.State)
	if m.EndReason != "" {
		fmt.Fprintf(&b, " (%s)", dao.EndReason(m.EndReason).Describe())
	}
	if m.Error != "" {
		fmt.Fprintf(&b, ": %s", m.Error)
	}
	if m.URL != "" {
		fmt.Fprintf(&b, " (%s)", m.URL)
	}
	return b.String()
}

// batch is how many rows one claim takes.
const batch = 50

// Sender sends the notifications due.
type Sender struct {
	cfg Config
	db  *dao.DB
	// client sends the webhooks (webhookClient).
	client *http.Client
	// mu makes the calls of Counted one at a time.
	mu sync.Mutex
}

// NewSender returns a Sender of db's notifications.
func NewSender(cfg Config, db *dao.DB) *Sender {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.WebhookEnvPattern == "" {
		cfg.WebhookEnvPattern = workflow.DefaultWebhookEnvPattern
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	return &Sender{cfg: cfg, db: db, client: webhookClient(cfg.Timeout, cfg.AllowPrivateTargets)}
}

// Run sends the notifications due until ctx ends, looking every PollInterval.
func (s *Sender) Run(ctx context.Context) error {
	tick := s.cfg.Clock.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		for {
			n, err := s.SendDue(ctx)
			if err != nil && ctx.Err() == nil {
				s.cfg.Log.Debug().Err(err).Msg("could not send the notifications due; trying again at the next poll")
			}
			if err != nil || n < batch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.Chan():
		}
	}
}

// hold is how long a sender holds the rows it took: past it, another may send them again.
// The rows of a batch are tried at once, each within Timeout, so twice that outlasts them.
func (s *Sender) hold() time.Duration { return 2 * s.cfg.Timeout }

// SendDue takes one batch of the rows due, tries them all at once and records each result.
// It returns how many it took.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	ns, err := s.db.NotificationClaimDue(ctx, batch, s.hold())
	if err != nil {
		return 0, err
	}
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { errs[i] = s.try(ctx, n) })
	}
	wg.Wait()
	return len(ns), errors.Join(errs...)
}

// try sends n once and records the result under its attempt.
func (s *Sender) try(ctx context.Context, n dao.Notification) error {
	err := s.send(ctx, n)
	state, retryIn, msg := dao.NotificationSent, time.Duration(0), ""
	switch {
	case err == nil:
	case n.Attempts >= s.cfg.MaxAttempts:
		state, msg = dao.NotificationDead, err.Error()
	default:
		state, retryIn, msg = dao.NotificationPending, s.Backoff(n.Attempts), err.Error()
	}
	log := s.cfg.Log.With().Int64("notification", n.ID).Str("event", n.Event).Str("channel", n.Channel).
		Int("attempt", n.Attempts).Str("idempotency_key", n.IdempotencyKey).Logger()
	ok, rerr := s.db.NotificationDoneIfSending(ctx, n.ID, n.Attempts, state, retryIn, msg)
	switch {
	case rerr != nil:
		return rerr
	case !ok:
		log.Warn().Msg("notification was taken by another sender while this one sent it")
		return nil
	}
	s.count(state)
	switch state {
	case dao.NotificationSent:
		log.Info().Msg("notification sent")
	case dao.NotificationDead:
		log.Error().Err(err).AnErr("cause", errors.Unwrap(err)).Msg("notification is dead: its last try failed")
	default:
		log.Warn().Err(err).AnErr("cause", errors.Unwrap(err)).Dur("retry_in", retryIn).Msg("notification failed; retrying")
	}
	return nil
}

func (s *Sender) count(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Counted == nil {
		return
	}
	if state == dao.NotificationPending {
		state = "failed"
	}
	s.cfg.Counted(state)
}

// Backoff is the wait after the attempt-th failed try: Backoff doubled attempt-1 times, at
// most MaxBackoff, plus up to a fifth of it at random.
func (s *Sender) Backoff(attempt int) time.Duration {
	return retry.Policy{Initial: s.cfg.Backoff, Max: s.cfg.MaxBackoff, Jitter: 0.2, Random: s.cfg.Jitter}.Delay(attempt)
}

// message is what row n says.
func (s *Sender) message(n dao.Notification) (Message, error) {
	var p struct {
		State, Error, Task, Node string
		EndReason                string `json:"end_reason"`
		Time                     time.Time
	}
	if err := json.Unmarshal(n.Payload, &p); err != nil {
		return Message{}, fmt.Errorf("read the notification's payload: %w", err)
	}
	m := Message{Event: n.Event, State: p.State, EndReason: p.EndReason, Error: p.Error, Task: p.Task, Node: p.Node, Time: p.Time}
	if n.WorkflowName != nil {
		m.Workflow = *n.WorkflowName
	}
	if n.WorkflowInstanceID != nil {
		m.Instance = *n.WorkflowInstanceID
		if s.cfg.PublicURL != "" {
			m.URL = strings.TrimSuffix(s.cfg.PublicURL, "/") + "/workflows/" + strconv.FormatInt(m.Instance, 10)
		}
	}
	if n.TaskInstanceID != nil {
		m.TaskID = *n.TaskInstanceID
	}
	return m, nil
}

// errNoMailer fails a mail when no SMTP server is configured.
var errNoMailer = errors.New("email is not configured: set notify.email.host in the masters' config")

// send makes one try of n, within Timeout.
func (s *Sender) send(ctx context.Context, n dao.Notification) error {
	m, err := s.message(n)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	switch n.Channel {
	case dao.ChannelWebhook:
		return s.webhook(ctx, n, m)
	case dao.ChannelEmail:
		if s.cfg.Mailer == nil {
			return errNoMailer
		}
		return s.cfg.Mailer.Send(ctx, n.Target, m, n.IdempotencyKey)
	}
	return fmt.Errorf("unknown channel %q", n.Channel)
}

// webhook POSTs m to the URL in n's variable, if the variable is one webhooks may name.
func (s *Sender) webhook(ctx context.Context, n dao.Notification, m Message) error {
	if !workflow.WebhookEnvAllowed(s.cfg.WebhookEnvPattern, n.Target) {
		return fmt.Errorf("environment variable %s may not hold a webhook's URL: its name does not match notify.webhook-env-pattern (%s)",
			n.Target, s.cfg.WebhookEnvPattern)
	}
	url := s.cfg.Getenv(n.Target)
	if url == "" {
		return fmt.Errorf("environment variable %s is not set on this master: it holds the webhook's URL", n.Target)
	}
	var body []byte
	var err error
	if n.Slack {
		body, err = json.Marshal(map[string]string{"text": m.Text()})
	} else {
		body, err = json.Marshal(m)
	}
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		// The URL is a secret: say what is wrong with it without it.
		return fmt.Errorf("the URL in %s is not a valid URL", n.Target)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", n.IdempotencyKey)
	req.Header.Set("User-Agent", "zksched")
	resp, err := s.client.Do(req)
	if err != nil {
		return classify(n.Target, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	// The status code alone: the reason phrase, the headers (a Location) and the body are the
	// target's words, not for every viewer of the notification.
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		return nil
	case code >= 300 && code <= 399:
		return fmt.Errorf("the webhook in %s answered %s: a redirect, which is not followed", n.Target, statusText(code))
	default:
		return fmt.Errorf("the webhook in %s answered %s", n.Target, statusText(code))
	}
}

// statusText is code with its standard name, if it has one.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return strconv.Itoa(code)
}
