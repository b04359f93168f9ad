package access

// mfaGated lists, by operation ID, every tenancy-mutating operation: with ENABLE_2FA on, a
// JWT session must carry mfa=true to call one (403 "MFA required" otherwise). API keys and
// service principals are not gated: they are created through a gated operation. This list is
// the one place the gate is defined; docs/authentication.md mirrors it and a test checks that
// every entry names a registered operation.
var mfaGated = map[string]bool{
	// Partners, organizations, sites.
	"create-partner": true, "update-partner": true, "delete-partner": true, "update-my-partner": true,
	"create-organization": true, "update-organization": true, "delete-organization": true,
	"restore-organization": true,
	"create-site":          true, "update-site": true, "delete-site": true,
	// Users and their access.
	"invite-user": true, "resend-invite": true, "update-user": true, "delete-user": true,
	"assign-user-role": true, "issue-password-reset": true,
	// Roles.
	"create-role": true, "update-role": true, "delete-role": true, "clone-role": true,
	// Access reviews.
	"create-access-review": true, "decide-access-review-item": true, "complete-access-review": true,
	// API keys.
	"create-api-key": true, "update-api-key": true, "revoke-api-key": true, "rotate-api-key": true,
	// Partner API service principals and their keys.
	"create-service-principal": true, "update-service-principal": true, "create-service-principal-key": true,
	"rotate-service-principal-key": true, "revoke-service-principal-key": true,
	// Devices leaving a customer: moved to another organization, or retired.
	"move-device-org": true, "decommission-device": true,
}

// MFAGated reports whether the operation is MFA-gated.
func MFAGated(operationID string) bool { return mfaGated[operationID] }

// MFAGatedOperations lists the gated operation IDs.
func MFAGatedOperations() []string {
	out := make([]string, 0, len(mfaGated))
	for id := range mfaGated {
		out = append(out, id)
	}
	return out
}
