package security

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// Score factors, with their weights (they add up to 100).
const (
	FactorPatches        = "patches"
	FactorEncryption     = "encryption"
	FactorAntivirus      = "antivirus"
	FactorFirewall       = "firewall"
	FactorOpenPorts      = "open_ports"
	FactorPasswordPolicy = "password_policy"
	FactorOSCurrency     = "os_currency"
	FactorAdminExposure  = "admin_exposure"
)

// factorWeights in the order the breakdown lists them.
var factorWeights = []struct {
	Name   string
	Weight int
}{
	{FactorPatches, 20}, {FactorEncryption, 15}, {FactorAntivirus, 15}, {FactorFirewall, 15},
	{FactorOpenPorts, 10}, {FactorPasswordPolicy, 10}, {FactorOSCurrency, 10}, {FactorAdminExposure, 5},
}

// signaturesFresh is how old antivirus signatures may be to count as current.
const signaturesFresh = 7 * 24 * time.Hour

// SecurityScoreFactor is one factor of a score: its weight, the points earned and why.
type SecurityScoreFactor struct {
	Factor string  `json:"factor" enum:"patches,encryption,antivirus,firewall,open_ports,password_policy,os_currency,admin_exposure"`
	Weight int     `json:"weight"`
	Points float64 `json:"points" doc:"Points earned, 0 to weight (an average over devices in fleet breakdowns)."`
	Reason string  `json:"reason"`
}

// Score is a device's security score.
type Score struct {
	Score    int                   `json:"score"`
	RiskBand string                `json:"riskBand" enum:"low,medium,high,critical"`
	Factors  []SecurityScoreFactor `json:"factors"`
}

// RiskBand is the band of a score: 90 and above low, 70 to 89 medium, 50 to 69 high, below 50
// critical.
func RiskBand(score int) string {
	switch {
	case score >= 90:
		return "low"
	case score >= 70:
		return "medium"
	case score >= 50:
		return "high"
	}
	return "critical"
}

// scoreOf scores a device against the policy that applies to it; newest is the newest OS
// version among its organization's devices of the same OS.
func scoreOf(r row, p SecurityPolicy, newest string, brief bool) Score {
	var out Score
	sprintf := func(format string, args ...any) string {
		if brief {
			return ""
		}
		return fmt.Sprintf(format, args...)
	}
	total := 0
	add := func(name string, points int, reason string) {
		w := 0
		for _, f := range factorWeights {
			if f.Name == name {
				w = f.Weight
			}
		}
		points = max(0, min(points, w))
		total += points
		if !brief {
			out.Factors = append(out.Factors, SecurityScoreFactor{Factor: name, Weight: w, Points: float64(points), Reason: reason})
		}
	}
	switch n := r.SecurityPatches; {
	case n == 0:
		add(FactorPatches, 20, "no security patches pending")
	case n <= 2:
		add(FactorPatches, 10, sprintf("%d security patches pending", n))
	default:
		add(FactorPatches, 0, sprintf("%d security patches pending", n))
	}
	switch r.Encryption {
	case agentproto.EncryptionFull:
		add(FactorEncryption, 15, "every volume is encrypted")
	case agentproto.EncryptionPartial:
		add(FactorEncryption, 7, "some volumes are not encrypted")
	case agentproto.EncryptionNone:
		add(FactorEncryption, 0, "no volume is encrypted")
	default:
		add(FactorEncryption, 0, "the encryption of the volumes is not known")
	}
	switch {
	case !r.AVInstalled:
		add(FactorAntivirus, 0, "no antivirus is installed")
	case !r.AVRunning:
		add(FactorAntivirus, 5, "the antivirus is installed but does not run")
	case r.SignaturesAt == nil || r.CollectedAt == nil || r.CollectedAt.Sub(*r.SignaturesAt) > signaturesFresh:
		add(FactorAntivirus, 10, "the antivirus runs but its signatures are older than 7 days")
	default:
		add(FactorAntivirus, 15, "the antivirus runs with current signatures")
	}
	if r.Firewall {
		add(FactorFirewall, 15, "the firewall is enabled ("+r.FirewallBackend+")")
	} else {
		add(FactorFirewall, 0, "no firewall filters traffic")
	}
	switch n := r.ExposedPorts; {
	case n <= 5:
		add(FactorOpenPorts, 10, sprintf("%d ports listen beyond the loopback", n))
	case n <= 15:
		add(FactorOpenPorts, 5, sprintf("%d ports listen beyond the loopback (more than 5)", n))
	default:
		add(FactorOpenPorts, 0, sprintf("%d ports listen beyond the loopback (more than 15)", n))
	}
	minLen := p.MinPasswordLength
	if minLen == 0 {
		minLen = 8
	}
	pw, why := 0, []string{}
	if r.PassMaxDays > 0 && r.PassMaxDays <= 365 {
		pw += 4
		why = append(why, sprintf("passwords expire after %d days", r.PassMaxDays))
	} else {
		why = append(why, "passwords do not expire within a year")
	}
	if r.PassMinLength >= minLen {
		pw += 6
		why = append(why, sprintf("at least %d characters are required", r.PassMinLength))
	} else {
		why = append(why, sprintf("fewer than %d characters are allowed", minLen))
	}
	add(FactorPasswordPolicy, pw, join(brief, why))
	osPts, osWhy := 0, []string{}
	switch {
	case r.Reboot:
		osWhy = append(osWhy, "a reboot is pending to finish updates")
	case newest != "" && compareVersions(r.OSVersion, newest) < 0:
		osWhy = append(osWhy, "OS version "+r.OSVersion+" is behind "+newest+", the newest in the organization")
	default:
		osPts += 5
		osWhy = append(osWhy, "the OS version is the newest in the organization")
	}
	if r.AutoUpdates {
		osPts += 5
		osWhy = append(osWhy, "updates install automatically")
	} else {
		osWhy = append(osWhy, "automatic updates are off")
	}
	add(FactorOSCurrency, osPts, join(brief, osWhy))
	maxAdmins := p.MaxAdministrators
	if maxAdmins == 0 {
		maxAdmins = builtinPolicy.MaxAdministrators
	}
	switch {
	case r.ExtraRoot:
		add(FactorAdminExposure, 0, "an account other than root has uid 0")
	case r.Admins > maxAdmins:
		add(FactorAdminExposure, 0, sprintf("%d administrators can sign in, more than %d", r.Admins, maxAdmins))
	default:
		add(FactorAdminExposure, 5, sprintf("%d administrators can sign in", r.Admins))
	}
	out.Score = total
	out.RiskBand = RiskBand(total)
	return out
}

// compareVersions compares dotted versions numerically where both parts are numbers.
func compareVersions(a, b string) int {
	pa, pb := strings.FieldsFunc(a, isSep), strings.FieldsFunc(b, isSep)
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y string
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		nx, ex := strconv.Atoi(x)
		ny, ey := strconv.Atoi(y)
		switch {
		case ex == nil && ey == nil:
			if nx != ny {
				if nx < ny {
					return -1
				}
				return 1
			}
		case x != y:
			return strings.Compare(x, y)
		}
	}
	return 0
}

func isSep(r rune) bool { return r == '.' || r == '-' || r == '_' || r == ' ' }

func join(brief bool, parts []string) string {
	if brief {
		return ""
	}
	return strings.Join(parts, "; ")
}
