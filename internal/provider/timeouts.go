// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"time"

	atimeouts "github.com/hashicorp/terraform-plugin-framework-timeouts/action/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	aschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// Every operation of kubeplay that waits is bounded by a key of a
// `timeouts` block (terraform-plugin-framework-timeouts), counted from the
// start of the operation. The package checks that a key parses as a
// duration; positiveDuration adds that it is more than zero, since an
// operation with no time left would fail at once.

// timeoutsDescription describes every timeouts block.
const timeoutsDescription = "How long each operation may take, as positive durations."

// timeoutsBlock is a resource's timeouts block with opts' keys.
func timeoutsBlock(ctx context.Context, opts timeouts.Opts) schema.Block {
	block := timeouts.Block(ctx, opts)
	b, ok := block.(schema.SingleNestedBlock)
	if !ok {
		return block // TestTimeoutsBlocks fails then
	}
	b.MarkdownDescription = timeoutsDescription
	for name, a := range b.Attributes {
		if s, ok := a.(schema.StringAttribute); ok {
			s.Validators = append(s.Validators, positiveDuration())
			b.Attributes[name] = s
		}
	}
	return b
}

// actionTimeoutsBlock is an action's timeouts block, whose one key is invoke.
func actionTimeoutsBlock(ctx context.Context, opts atimeouts.Opts) aschema.Block {
	block := atimeouts.BlockWithOpts(ctx, opts)
	b, ok := block.(aschema.SingleNestedBlock)
	if !ok {
		return block // TestTimeoutsBlocks fails then
	}
	b.MarkdownDescription = timeoutsDescription
	for name, a := range b.Attributes {
		if s, ok := a.(aschema.StringAttribute); ok {
			s.Validators = append(s.Validators, positiveDuration())
			b.Attributes[name] = s
		}
	}
	return b
}

// positiveDuration refuses a duration of zero or less; what does not parse
// is left to the timeouts package's own validator, so that it is reported
// once.
func positiveDuration() validator.String {
	return stringCheck{
		desc: "must be a positive duration such as 90s, 5m or 1h30m",
		check: func(path, s string) (string, string) {
			if d, err := time.ParseDuration(s); err != nil || d > 0 {
				return "", ""
			}
			return "Invalid Duration", fmt.Sprintf("%s must be a positive duration such as 90s, 5m or 1h30m; got %q. "+
				"Remove it for the default.", path, s)
		},
	}
}
