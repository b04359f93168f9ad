// Package scripts keeps a tenant's scripts and runs them on devices: the scripts themselves
// (of a partner or of one organization), every saved version, categories and tags, a
// read-only system library and templates shipped with Gale, bundles that carry scripts from
// one installation or tenant to another, and executions, each carried to its device by a
// run_script command of the devices domain.
package scripts

import (
	"time"
)

// Operating systems a script is written for.
const (
	OSWindows = "windows"
	OSMacOS   = "macos"
	OSLinux   = "linux"
)

// Languages.
const (
	LangBash       = "bash"
	LangSh         = "sh"
	LangPython     = "python"
	LangPowerShell = "powershell"
	LangCmd        = "cmd"
)

// Accounts a script runs as.
const (
	RunAsSystem   = "system"
	RunAsUser     = "user"
	RunAsElevated = "elevated"
)

// Parameter types.
const (
	ParamString  = "string"
	ParamNumber  = "number"
	ParamBoolean = "boolean"
	ParamSelect  = "select"
)

// Limits.
const (
	MaxContentBytes    = 256 << 10
	MaxParameters      = 64
	MaxNameLen         = 255
	MaxDescriptionLen  = 4000
	DefaultTimeout     = 300
	MaxTimeout         = 3600
	MaxExecuteDevices  = 500
	maxParamValueLen   = 4096
	maxOptions         = 100
	maxTagsPerScript   = 20
	maxVersionNoteLen  = 1000
	maxCategoryDepth   = 5
	maxCategoryNameLen = 100
)

// ScriptParameter is an input of a script; its value reaches the script as an environment variable
// of the same name.
type ScriptParameter struct {
	Name         string   `json:"name" minLength:"1" maxLength:"64" doc:"An environment variable name: letters, digits and _, not starting with a digit."`
	Type         string   `json:"type" enum:"string,number,boolean,select"`
	Label        string   `json:"label,omitempty" maxLength:"200"`
	DefaultValue any      `json:"defaultValue,omitempty" doc:"A value of the parameter's type, used when an execution gives none."`
	Required     bool     `json:"required,omitempty" doc:"An execution must give a value (or the parameter has a default)."`
	Options      []string `json:"options,omitempty" doc:"The choices of a select parameter."`
}

// Script is the API view of a script.
type Script struct {
	ID                      string             `json:"id" format:"uuid"`
	PartnerID               string             `json:"partnerId" format:"uuid"`
	OrgID                   *string            `json:"orgId" doc:"The organization the script belongs to; null: every organization of the partner."`
	Name                    string             `json:"name"`
	Description             string             `json:"description"`
	CategoryID              *string            `json:"categoryId"`
	Category                *string            `json:"category" doc:"The category's name."`
	Tags                    []string           `json:"tags"`
	OSTypes                 []string           `json:"osTypes"`
	Language                string             `json:"language" enum:"bash,sh,python,powershell,cmd"`
	Content                 string             `json:"content"`
	Parameters              []ScriptParameter  `json:"parameters"`
	TimeoutSeconds          int                `json:"timeoutSeconds"`
	RunAs                   string             `json:"runAs" enum:"system,user,elevated"`
	ExitCodeSeverityMapping map[string]*string `json:"exitCodeSeverityMapping,omitempty" doc:"Exit code (or \"default\") to alert severity; null means success. See the API notes."`
	Version                 int                `json:"version"`
	Source                  *string            `json:"source" doc:"Where the script came from: library:<id>, template:<id> or bundle:<sha256>; null when written here."`
	CreatedBy               *string            `json:"createdBy"`
	CreatedAt               time.Time          `json:"createdAt"`
	UpdatedAt               time.Time          `json:"updatedAt"`
}

// ScriptInput is the body of a create (every field) or a replace (PUT).
type ScriptInput struct {
	OrgID                   string             `json:"orgId,omitempty" format:"uuid" doc:"Create only: the organization the script belongs to; omitted by a partner caller: partner-wide."`
	PartnerID               string             `json:"partnerId,omitempty" format:"uuid" doc:"Create only, system callers: the partner of a partner-wide script."`
	Name                    string             `json:"name" minLength:"1" maxLength:"255"`
	Description             string             `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	CategoryID              string             `json:"categoryId,omitempty" format:"uuid"`
	Tags                    []string           `json:"tags,omitempty" maxItems:"20" doc:"Tag names; unknown ones are created in the script's scope."`
	OSTypes                 []string           `json:"osTypes" minItems:"1" maxItems:"3"`
	Language                string             `json:"language" enum:"bash,sh,python,powershell,cmd"`
	Content                 string             `json:"content" minLength:"1" multiline:"true"`
	Parameters              []ScriptParameter  `json:"parameters,omitempty" maxItems:"64"`
	TimeoutSeconds          int                `json:"timeoutSeconds,omitempty" minimum:"1" maximum:"3600" doc:"Default 300."`
	RunAs                   string             `json:"runAs,omitempty" enum:"system,user,elevated" doc:"Default system."`
	ExitCodeSeverityMapping map[string]*string `json:"exitCodeSeverityMapping,omitempty"`
	VersionNote             string             `json:"versionNote,omitempty" maxLength:"1000" multiline:"true" doc:"A note kept with the version this save makes."`
}

// ScriptVersion is one saved state of a script.
type ScriptVersion struct {
	ID                      string             `json:"id" format:"uuid"`
	ScriptID                string             `json:"scriptId" format:"uuid"`
	Version                 int                `json:"version"`
	Name                    string             `json:"name"`
	OSTypes                 []string           `json:"osTypes"`
	Language                string             `json:"language"`
	Content                 string             `json:"content"`
	Parameters              []ScriptParameter  `json:"parameters"`
	TimeoutSeconds          int                `json:"timeoutSeconds"`
	RunAs                   string             `json:"runAs"`
	ExitCodeSeverityMapping map[string]*string `json:"exitCodeSeverityMapping,omitempty"`
	Note                    string             `json:"note"`
	CreatedBy               *string            `json:"createdBy"`
	CreatedAt               time.Time          `json:"createdAt"`
}
