// Package blob stores files (ticket attachments, generated reports, script bundles, patch
// reports) by key, behind one interface with two implementations: the server's own database
// (the default, nothing more to run) and any S3-compatible object store.
//
// Blobs may be hundreds of megabytes, so both implementations stream: a Put reads its reader
// a chunk of about 1 MiB at a time and an Open hands back a reader that fetches its content
// as the caller reads, so memory stays flat whatever the size. Keys carry the tenant
// ("tickets/<orgId>/<attachmentId>"): keeping one organization from another's blobs is the
// caller's job.
package blob
