//go:build tools

// Package tools pins the development tools the GNUmakefile runs.
package tools

import (
	// Documentation generation
	_ "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs"
	// Linting
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
