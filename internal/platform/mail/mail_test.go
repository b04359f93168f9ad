package mail_test

import (
	"context"
	"strings"
	"testing"

	"gale/internal/platform/mail"
	"gale/internal/platform/mail/mailtest"
)

func TestSMTPDelivers(t *testing.T) {
	srv := mailtest.Start(t)
	s, err := mail.NewSMTP(srv.URL(), "gale@example.test")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(context.Background(), mail.Message{To: []string{"ann@example.test"}, Subject: "Hello",
		Body: "line one\n.line starting with a dot\n"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || msgs[0].From != "gale@example.test" || msgs[0].To[0] != "ann@example.test" {
		t.Fatalf("delivered %+v", msgs)
	}
	if !strings.Contains(msgs[0].Data, "Subject: Hello\r\n") || !strings.Contains(msgs[0].Data, "\r\n.line starting with a dot\r\n") {
		t.Fatalf("message data %q", msgs[0].Data)
	}
}

func TestSMTPURLValidation(t *testing.T) {
	if s, err := mail.NewSMTP("", "x"); s != nil || err != nil {
		t.Fatalf("empty URL = %v, %v; want no sender and no error", s, err)
	}
	for _, bad := range []string{"http://host", "smtp://", "not a url"} {
		if _, err := mail.NewSMTP(bad, "x"); err == nil {
			t.Errorf("NewSMTP(%q) accepted", bad)
		}
	}
	s, err := mail.NewSMTP("smtp://127.0.0.1:1", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), mail.Message{To: []string{"a@b"}, Subject: "s", Body: "b"}); err == nil ||
		!strings.Contains(err.Error(), "connect to SMTP server") {
		t.Fatalf("send to a closed port = %v, want a connect error naming the server", err)
	}
}
