package patches

// SecuritySummaryJoin left-joins the patch summary (alias ps) of the device whose ID is in
// column, for the security score: read it with SecuritySummaryColumns.
func SecuritySummaryJoin(column string) string {
	return " LEFT JOIN patch_device_summaries ps ON ps.device_id = " + column
}

// SecuritySummaryColumns are, over SecuritySummaryJoin, the device's pending security patches
// (pending patches of severity critical or category security) and whether it awaits a reboot
// to finish installing; 0 and false for a device never scanned.
const SecuritySummaryColumns = "COALESCE(ps.critical_pending, 0), COALESCE(ps.reboot_required, FALSE)"
