// Package mailtest is a small SMTP server for tests: it speaks enough of RFC 5321 (EHLO,
// MAIL, RCPT, DATA, RSET, NOOP, QUIT) for a real client to deliver to it over TCP, and keeps
// what it receives.
package mailtest

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// Message is one delivered mail.
type Message struct {
	From string
	To   []string
	Data string // headers and body, with CRLF line ends, without the final "."
}

// Server is a running SMTP receiver.
type Server struct {
	Addr     string
	ln       net.Listener
	mu       sync.Mutex
	messages []Message
}

// Start listens on a free loopback port until t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), ln: ln}
	go s.serve()
	t.Cleanup(func() { ln.Close() })
	return s
}

// URL is the SMTP_URL that reaches this server.
func (s *Server) URL() string { return "smtp://" + s.Addr }

// Messages returns what was delivered so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

func (s *Server) serve() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.session(conn)
	}
}

func (s *Server) session(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	reply := func(line string) { _, _ = conn.Write([]byte(line + "\r\n")) }
	reply("220 mailtest ready")
	var msg Message
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			reply("250-mailtest")
			reply("250 8BITMIME")
		case strings.HasPrefix(cmd, "MAIL FROM:"):
			msg = Message{From: address(line)}
			reply("250 ok")
		case strings.HasPrefix(cmd, "RCPT TO:"):
			msg.To = append(msg.To, address(line))
			reply("250 ok")
		case cmd == "DATA":
			reply("354 end with <CRLF>.<CRLF>")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(strings.TrimPrefix(l, "."))
			}
			msg.Data = b.String()
			s.mu.Lock()
			s.messages = append(s.messages, msg)
			s.mu.Unlock()
			reply("250 queued")
		case cmd == "RSET", cmd == "NOOP":
			reply("250 ok")
		case cmd == "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 not implemented")
		}
	}
}

// address takes the path of "MAIL FROM:<a@b> BODY=8BITMIME" or "RCPT TO:<a@b>".
func address(line string) string {
	_, rest, _ := strings.Cut(line, "<")
	addr, _, _ := strings.Cut(rest, ">")
	return addr
}
