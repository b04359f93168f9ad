package automations

import (
	"fmt"
	"slices"
	"strings"

	// Time zones of schedules must resolve on hosts without a zoneinfo database (containers).
	_ "time/tzdata"

	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// EventTypes are the domain events an event trigger may name.
var EventTypes = []string{
	"device.enrolled", "device.online", "device.offline", "device.main_agent_silent", "device.decommissioned",
	"alert.triggered", "alert.acknowledged", "alert.resolved", "alert.suppressed", "alert.dismissed",
	"script.completed", "script.failed",
	EventStarted, EventCompleted, EventFailed,
	"policy.non_compliant", "policy.compliant",
	"patch.job_completed", "software.deployment_completed",
	"deployment.started", "deployment.paused", "deployment.completed", "deployment.failed", "deployment.cancelled",
	"maintenance.started", "maintenance.ended",
	"monitor.status_changed",
}

// filterKeys are the fields an event filter may test.
var filterKeys = []string{"orgId", "siteId", "deviceId", "severity", "status", "scriptId", "automationId", "policyId"}

var (
	conditionFields = []string{"osType", "status", "tag", "hostname", "siteId"}
	severities      = []string{"critical", "high", "medium", "low", "info"}
)

// checker collects the validation failures of a body.
type checker struct{ details []apperr.Detail }

func (c *checker) fail(field, format string, args ...any) {
	c.details = append(c.details, apperr.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.details) == 0 {
		return nil
	}
	return apperr.InvalidFields(c.details)
}

func (c *checker) ids(field string, ids []string, max int) {
	if len(ids) > max {
		c.fail(field, "at most %d", max)
	}
	for i, id := range ids {
		if !store.ValidID(id) {
			c.fail(fmt.Sprintf("%s[%d]", field, i), "not a valid ID")
		}
	}
}

// checkTrigger validates a trigger and normalizes it.
func (c *checker) trigger(t *AutomationTrigger) {
	t.WebhookURL, t.Secret, t.SecretHint = "", "", ""
	switch t.Type {
	case TriggerSchedule:
		if _, err := clock.ParseCron(t.Cron, t.Timezone); err != nil {
			c.fail("trigger.cron", "%s", err.Error())
		}
		if t.Timezone == "" {
			t.Timezone = "UTC"
		}
		t.Cron = strings.Join(strings.Fields(t.Cron), " ")
		if t.EventType != "" || len(t.Filter) > 0 {
			c.fail("trigger", "a schedule trigger takes cron and timezone only")
		}
	case TriggerEvent:
		if !slices.Contains(EventTypes, t.EventType) {
			c.fail("trigger.eventType", "eventType must be one of %s", strings.Join(EventTypes, ", "))
		}
		for k := range t.Filter {
			if !slices.Contains(filterKeys, k) {
				c.fail("trigger.filter."+k, "filter keys are %s", strings.Join(filterKeys, ", "))
			}
		}
		if t.Cron != "" || t.Timezone != "" {
			c.fail("trigger", "an event trigger takes eventType and filter only")
		}
	case TriggerWebhook, TriggerManual:
		if t.Cron != "" || t.Timezone != "" || t.EventType != "" || len(t.Filter) > 0 {
			c.fail("trigger", "a %s trigger takes no other field", t.Type)
		}
	default:
		c.fail("trigger.type", "type must be one of schedule, event, webhook, manual")
	}
}

func (c *checker) conditions(list []AutomationCondition) {
	if len(list) > maxConditions {
		c.fail("conditions", "at most %d conditions", maxConditions)
	}
	for i, cond := range list {
		f := fmt.Sprintf("conditions[%d]", i)
		if !slices.Contains(conditionFields, cond.Field) {
			c.fail(f+".field", "field must be one of %s", strings.Join(conditionFields, ", "))
		}
		switch cond.Operator {
		case "eq", "neq", "contains":
			if cond.Value == "" || len(cond.Values) > 0 {
				c.fail(f+".value", "%s takes a value (not values)", cond.Operator)
			}
		case "in", "notIn":
			if len(cond.Values) == 0 || cond.Value != "" {
				c.fail(f+".values", "%s takes values (not value)", cond.Operator)
			}
		default:
			c.fail(f+".operator", "operator must be one of eq, neq, in, notIn, contains")
		}
	}
}

func (c *checker) actions(list []AutomationAction) {
	if len(list) == 0 || len(list) > maxActions {
		c.fail("actions", "1 to %d actions", maxActions)
	}
	for i, a := range list {
		f := fmt.Sprintf("actions[%d]", i)
		only := func(field string, set bool) {
			if set {
				c.fail(f+"."+field, "a %s action takes no %s", a.Type, field)
			}
		}
		switch a.Type {
		case ActionRunScript:
			if !store.ValidID(a.ScriptID) {
				c.fail(f+".scriptId", "scriptId is required")
			}
			only("command", a.Command != nil)
			only("channelIds", len(a.ChannelIDs) > 0)
			only("message", a.Message != "")
		case ActionRunCommand:
			if a.Command == nil || a.Command.Type == "" {
				c.fail(f+".command", "command {type, payload} is required")
			}
			only("scriptId", a.ScriptID != "")
			only("channelIds", len(a.ChannelIDs) > 0)
			only("message", a.Message != "")
		case ActionNotify:
			if len(a.ChannelIDs) == 0 {
				c.fail(f+".channelIds", "name 1 to %d channels", maxChannels)
			}
			c.ids(f+".channelIds", a.ChannelIDs, maxChannels)
			if strings.TrimSpace(a.Message) == "" {
				c.fail(f+".message", "message is required")
			}
			only("scriptId", a.ScriptID != "")
			only("command", a.Command != nil)
		case ActionCreateAlert:
			if !slices.Contains(severities, a.Severity) {
				c.fail(f+".severity", "severity must be one of %s", strings.Join(severities, ", "))
			}
			if strings.TrimSpace(a.Title) == "" {
				c.fail(f+".title", "title is required")
			}
			only("scriptId", a.ScriptID != "")
			only("command", a.Command != nil)
			only("channelIds", len(a.ChannelIDs) > 0)
		default:
			c.fail(f+".type", "type must be one of run_script, run_command, notify, create_alert")
		}
		if a.Type != ActionRunScript && len(a.Parameters) > 0 {
			c.fail(f+".parameters", "only a run_script action takes parameters")
		}
	}
}

// targets checks an automation's targets; orgID is its organization, empty for a
// partner-wide one.
func (c *checker) targets(t *devices.Targets, trigger string, actions []AutomationAction, orgID string) {
	if t == nil {
		// Event and webhook runs may act on the device their event or payload names.
		if trigger != TriggerEvent && trigger != TriggerWebhook && slices.ContainsFunc(actions, func(a AutomationAction) bool {
			return a.Type != ActionNotify
		}) {
			c.fail("targets", "targets are required for device actions")
		}
		return
	}
	c.details = append(c.details, t.CheckShape(orgID)...)
}

// validate checks a whole automation definition; orgID is its organization, empty for a
// partner-wide one.
func validate(name, description string, trigger *AutomationTrigger, conds []AutomationCondition, actions []AutomationAction, targets *devices.Targets, onFailure string,
	channels []string, orgID string) error {
	var c checker
	if strings.TrimSpace(name) == "" || len([]rune(name)) > maxNameLen {
		c.fail("name", "name is 1 to %d characters", maxNameLen)
	}
	if len([]rune(description)) > maxDescriptionLen {
		c.fail("description", "at most %d characters", maxDescriptionLen)
	}
	c.trigger(trigger)
	c.conditions(conds)
	c.actions(actions)
	c.targets(targets, trigger.Type, actions, orgID)
	if !slices.Contains([]string{OnFailureStop, OnFailureContinue, OnFailureNotify}, onFailure) {
		c.fail("onFailure", "onFailure must be one of stop, continue, notify")
	}
	c.ids("notifyChannelIds", channels, maxChannels)
	if onFailure == OnFailureNotify && len(channels) == 0 {
		c.fail("notifyChannelIds", "onFailure notify needs the channels to notify")
	}
	return c.err()
}
