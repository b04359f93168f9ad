package store

import (
	"database/sql"
	"time"
)

// NullIfEmpty stores an empty string as NULL.
func NullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// StringPtr reads a nullable text column: nil for NULL.
func StringPtr(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

// TimePtr reads a nullable time column: nil for NULL, else the time in UTC.
func TimePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// Deref is the string s points to, or "" for nil.
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
