package inventory

import "time"

// zoneAbbreviation is the fallback time zone name, such as "CET", when the platform does not
// give the zone's full name.
func zoneAbbreviation() string {
	name, _ := time.Now().Zone()
	return name
}
