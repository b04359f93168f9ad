package inventory

// cpuid executes the CPUID instruction for leaf (sub-leaf 0).
func cpuid(leaf uint32) (eax, ebx, ecx, edx uint32)

// cpuidHypervisor returns the vendor signature the hypervisor puts in CPUID leaf 0x40000000,
// or "" when the CPU reports no hypervisor (leaf 1, ECX bit 31).
func cpuidHypervisor() string {
	if _, _, ecx, _ := cpuid(1); ecx&(1<<31) == 0 {
		return ""
	}
	_, b, c, d := cpuid(0x40000000)
	sig := make([]byte, 0, 12)
	for _, r := range []uint32{b, c, d} {
		sig = append(sig, byte(r), byte(r>>8), byte(r>>16), byte(r>>24))
	}
	return string(sig)
}
