package host

// The package's tests search guest memory (scanInstances).
func init() { liveInstances = &instanceSet{m: map[*instance]struct{}{}} }
