// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"context"

	"github.com/go-logr/logr"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	logf "sigs.k8s.io/cluster-api/cmd/clusterctl/log"
)

// useLogger sends clusterctl's log to Terraform's, with ctx's fields, until
// the returned function restores a silent logger.
func useLogger(ctx context.Context) func() {
	logf.SetLogger(logr.New(&sink{ctx: ctx}))
	return func() { logf.SetLogger(logr.Discard()) }
}

// sink is a logr.LogSink writing to tflog: clusterctl's V(0) lines at debug,
// the more verbose ones at trace.
type sink struct {
	ctx    context.Context
	name   string
	fields map[string]any
}

var _ logr.LogSink = (*sink)(nil)

func (s *sink) Init(logr.RuntimeInfo)  {}
func (s *sink) Enabled(level int) bool { return level <= 5 }

func (s *sink) Info(level int, msg string, kv ...any) {
	f := s.with(kv)
	if level == 0 {
		tflog.Debug(s.ctx, "clusterctl: "+msg, f)
		return
	}
	tflog.Trace(s.ctx, "clusterctl: "+msg, f)
}

func (s *sink) Error(err error, msg string, kv ...any) {
	f := s.with(kv)
	f["error"] = err.Error()
	tflog.Warn(s.ctx, "clusterctl: "+msg, f)
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{ctx: s.ctx, name: s.name, fields: s.with(kv)}
}

func (s *sink) WithName(name string) logr.LogSink {
	n := name
	if s.name != "" {
		n = s.name + "/" + name
	}
	return &sink{ctx: s.ctx, name: n, fields: s.fields}
}

// with returns the sink's fields and kv's pairs in a new map.
func (s *sink) with(kv []any) map[string]any {
	f := make(map[string]any, len(s.fields)+len(kv)/2+1)
	for k, v := range s.fields {
		f[k] = v
	}
	if s.name != "" {
		f["logger"] = s.name
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			f[k] = kv[i+1]
		}
	}
	return f
}
