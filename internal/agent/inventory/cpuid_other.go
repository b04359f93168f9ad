//go:build !amd64

package inventory

// cpuidHypervisor: only x86 CPUs name their hypervisor through CPUID.
func cpuidHypervisor() string { return "" }
