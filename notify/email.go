package notify

import (
	"context"
	"fmt"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/zksched/zksched/dao"
)

// SMTP is how a master reaches its mail server.
type SMTP struct {
	// Host and Port are the server's address.
	Host string
	Port int
	// From is the sender's address.
	From string
	// Username and Password authenticate, when Username is set.
	Username, Password string
	// StartTLS requires STARTTLS before anything is sent; false sends in clear text, for a
	// relay on the local network.
	StartTLS bool
	// Timeout bounds the connection and each command.
	Timeout time.Duration
}

// NewMailer returns a Mailer that sends through s, one session a mail.
func NewMailer(s SMTP) Mailer { return smtpMailer{s} }

type smtpMailer struct{ s SMTP }

// Send mails msg to to. Its Message-ID is made of the idempotency key, so a mail sent twice
// (its sender died before recording it) carries the same id both times.
func (m smtpMailer) Send(ctx context.Context, to string, msg Message, idempotencyKey string) error {
	policy := mail.NoTLS
	if m.s.StartTLS {
		policy = mail.TLSMandatory
	}
	opts := []mail.Option{mail.WithPort(m.s.Port), mail.WithTimeout(m.s.Timeout), mail.WithTLSPolicy(policy)}
	if m.s.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(m.s.Username),
			mail.WithPassword(m.s.Password))
	}
	client, err := mail.NewClient(m.s.Host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	em := mail.NewMsg()
	if err := em.From(m.s.From); err != nil {
		return fmt.Errorf("from address %q: %w", m.s.From, err)
	}
	if err := em.To(to); err != nil {
		return fmt.Errorf("to address %q: %w", to, err)
	}
	em.Subject(msg.Text())
	em.SetMessageIDWithValue(idempotencyKey + "@zksched")
	em.SetGenHeader("Idempotency-Key", idempotencyKey)
	em.SetBodyString(mail.TypeTextPlain, mailBody(msg))
	if err := client.DialAndSendWithContext(ctx, em); err != nil {
		return fmt.Errorf("mail to %s through %s:%d: %w", to, m.s.Host, m.s.Port, err)
	}
	return nil
}

// mailBody is msg as text, a field a line.
func mailBody(msg Message) string {
	var b strings.Builder
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	line("event", msg.Event)
	line("workflow", msg.Workflow)
	if msg.Instance != 0 {
		line("instance", fmt.Sprint(msg.Instance))
	}
	line("task", msg.Task)
	line("node", msg.Node)
	line("state", msg.State)
	if msg.EndReason != "" {
		line("end reason", msg.EndReason+": "+dao.EndReason(msg.EndReason).Describe())
	}
	line("error", msg.Error)
	line("url", msg.URL)
	line("time", msg.Time.UTC().Format(time.RFC3339))
	return b.String()
}
