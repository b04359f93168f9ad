package alertchannels

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Actions of a notification.
const (
	ActionTrigger = "trigger"
	ActionResolve = "resolve"
	ActionTest    = "test"
)

// AlertView is the part of an alert (as the API shows it) the messages use.
type AlertView struct {
	ID          string     `json:"id"`
	PartnerID   string     `json:"partnerId"`
	OrgID       string     `json:"orgId"`
	SiteID      *string    `json:"siteId"`
	DeviceID    *string    `json:"deviceId"`
	RuleID      *string    `json:"ruleId"`
	Severity    string     `json:"severity"`
	Status      string     `json:"status"`
	Title       string     `json:"title"`
	Message     string     `json:"message"`
	TriggeredAt time.Time  `json:"triggeredAt"`
	ResolvedAt  *time.Time `json:"resolvedAt"`
}

// Notification is the stored payload of a delivery: what to say, sent the same on every
// attempt.
type Notification struct {
	Action    string          `json:"action" enum:"trigger,resolve,test"`
	EventID   string          `json:"eventId"`
	EventType string          `json:"eventType"`
	Timestamp time.Time       `json:"timestamp"`
	Step      int             `json:"step"`
	Hostname  string          `json:"hostname,omitempty"`
	Link      string          `json:"link"`
	Alert     json.RawMessage `json:"alert" doc:"The alert as the API shows it."`

	view AlertView
}

func (n *Notification) decode() error {
	return json.Unmarshal(n.Alert, &n.view)
}

func (n Notification) device() string {
	if n.Hostname != "" {
		return n.Hostname
	}
	if n.view.DeviceID != nil {
		return *n.view.DeviceID
	}
	return "-"
}

// headline is the one-line summary of every format.
func (n Notification) headline() string {
	sev := strings.ToUpper(n.view.Severity)
	switch n.Action {
	case ActionResolve:
		return fmt.Sprintf("[RESOLVED] %s on %s", n.view.Title, n.device())
	case ActionTest:
		return "[TEST] Gale notification channel test"
	}
	return fmt.Sprintf("[%s] %s on %s", sev, n.view.Title, n.device())
}

func (n Notification) statusWord() string {
	switch n.Action {
	case ActionResolve:
		return "resolved"
	case ActionTest:
		return "test"
	}
	if n.Step > 0 {
		return fmt.Sprintf("triggered (escalation step %d)", n.Step)
	}
	return "triggered"
}

// text is the plain-text body of email and the base of SMS.
func (n Notification) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", n.headline())
	fmt.Fprintf(&b, "Severity: %s\nStatus: %s\nDevice: %s\nTriggered: %s\n", n.view.Severity, n.statusWord(), n.device(),
		n.view.TriggeredAt.UTC().Format(time.RFC3339))
	if n.view.ResolvedAt != nil {
		fmt.Fprintf(&b, "Resolved: %s\n", n.view.ResolvedAt.UTC().Format(time.RFC3339))
	}
	if n.view.Message != "" {
		fmt.Fprintf(&b, "\n%s\n", n.view.Message)
	}
	fmt.Fprintf(&b, "\n%s\n", n.Link)
	return b.String()
}

// color is the severity's color (Teams theme, hex without #).
func (n Notification) color() string {
	if n.Action == ActionResolve {
		return "2EB67D"
	}
	switch n.view.Severity {
	case "critical":
		return "D70000"
	case "high":
		return "FF6600"
	case "medium":
		return "FFC000"
	case "low":
		return "0078D7"
	}
	return "808080"
}
