//go:build tools

// Package tools pins the Terraform CLI that set-up builds when none is on PATH.
package tools

import _ "github.com/hashicorp/terraform"
