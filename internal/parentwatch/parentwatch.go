// Package parentwatch tells a provider process that the Terraform process
// that started it is gone. go-plugin's server does not notice: after
// `kill -9` of terraform, the provider would otherwise live on, idle,
// forever.
package parentwatch

// Exited returns a channel that is closed when the process's parent ends,
// or nil (never ready) where that cannot be watched: an unsupported system,
// or a parent that was already gone.
func Exited() <-chan struct{} { return exited() }
