//go:build !linux

package elevate

import (
	"fmt"
	"io"

	"gale/internal/agent/capability"
)

// Service is the elevation service; only Linux agents have one that does something.
type Service struct{}

// New returns the elevation service.
func New(Options) *Service { return &Service{} }

// Register does nothing on this system: elevation requests are a Linux feature.
func (s *Service) Register(*capability.Registry) {}

// Ask refuses: elevation requests are a Linux feature.
func Ask(_ string, _ []string, _ bool, stderr io.Writer) int {
	fmt.Fprintln(stderr, "gale-agent elevate: elevation requests are supported on Linux only")
	return 1
}
