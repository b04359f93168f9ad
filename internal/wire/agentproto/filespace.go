package agentproto

// ErrInsufficientSpace: a file write declared more bytes than the target file system has free,
// less the reserve the agent keeps (409 at the API). A write that runs out of space midway
// fails with it too.
const ErrInsufficientSpace = "INSUFFICIENT_SPACE"
