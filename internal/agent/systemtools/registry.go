package systemtools

import "runtime"

// registryUnsupported answers every registry method. Off Windows there is no registry; on
// Windows this agent does not edit it yet.
func registryUnsupported() error {
	if runtime.GOOS == "windows" {
		return notSupported("registry tools are not available in this agent version")
	}
	return notSupported("the registry exists only on Windows")
}
