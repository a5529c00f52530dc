package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// The OpenAPI 3.1 document of /api/v1, served at /api/v1/openapi.json without authentication:
// it holds no data, only the shape of the API (as the source does), and clients and tools
// that generate them read it before they have a token.
//
// The response bodies' schemas are made from the Go types the handlers write, so they change
// with them; what is written as a map is described here by hand. The tests check the
// document against the routes (every /api/v1 route is documented, nothing else is), the
// query parameters the handlers accept, and the OpenAPI 3.1 schema.

// openAPIPath is where the document is served.
const openAPIPath = "/api/v1/openapi.json"

// operation is one route of the API in the document.
type operation struct {
	// pattern is the route's pattern in routes.
	pattern string
	summary string
	query   []param
	// body is the request body's schema, nil for none; bodyTypes its content types
	// (application/json when empty).
	body      any
	bodyTypes []string
	// optionalBody is set when the body may be left out.
	optionalBody bool
	// ok are the success answers, by status.
	ok map[int]answer
	// fails are the error statuses the handler itself answers with, beyond those every route
	// has (see openAPI).
	fails []int
}

type param struct {
	name, doc string
	schema    any
}

type answer struct {
	doc    string
	schema any
}

// failDocs describe the error statuses.
var failDocs = map[int]string{
	http.StatusBadRequest:            "A malformed id, an unknown parameter or filter value, a malformed body, or run params the workflow does not declare or of the wrong type.",
	http.StatusUnauthorized:          "No token, or a wrong one.",
	http.StatusForbidden:             "The user's role does not allow the action, or a cross-origin request.",
	http.StatusNotFound:              "No such instance, definition or schedule.",
	http.StatusConflict:              "The state does not allow the action.",
	http.StatusRequestEntityTooLarge: "A body over the limit (1 MiB by default).",
	http.StatusUnsupportedMediaType:  "The wrong content type.",
	http.StatusTooManyRequests: "Too many wrong tokens from this address, or too many requests from this user (api.rate-limit); " +
		"Retry-After says when to try again.",
	http.StatusServiceUnavailable: "PostgreSQL (or, for the cluster, ZooKeeper) cannot be reached, or the request timed out; or, " +
		"for a heavy read (an instance, a task, a log), the master is busy with api.heavy-reads others and Retry-After says to try again in a second.",
}

// Parameters shared by the lists.
var (
	beforeParam = param{"before", "The cursor of the next, older page: the `older` of this one.", positiveID}
	afterParam  = param{"after", "The cursor of the previous, newer page: the `newer` of this one.", positiveID}
	limitParam  = param{"limit", "The page's size, 1..1000; 50 by default.", intIn(1, 1000)}
)

var (
	positiveID = map[string]any{"type": "integer", "format": "int64", "minimum": 1}
	str        = map[string]any{"type": "string"}
	dateTime   = map[string]any{"type": "string", "format": "date-time"}
	nullID     = map[string]any{"type": []string{"integer", "null"}, "format": "int64", "minimum": 1}
	nullStr    = map[string]any{"type": []string{"string", "null"}}
	// queryTime is a time a filter takes: RFC 3339, or a UTC time without a zone.
	queryTime = map[string]any{"type": "string", "description": "RFC 3339, or 2026-11-22T03:00 (UTC)"}
	paramsMap = map[string]any{"type": "object", "additionalProperties": str, "description": "The run's params, as text. " +
		"Each must be one its workflow declares (the params of its definition version), of its type, unless the workflow has " +
		"params-extra: allow; otherwise the request is refused with 400 and nothing is created."}
)

func intIn(lo, hi int) map[string]any {
	return map[string]any{"type": "integer", "minimum": lo, "maximum": hi}
}

func enumOf[T ~string](values []T) map[string]any {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return map[string]any{"type": "string", "enum": s}
}

// object is a schema of an object with the properties props, those not in optional required.
func object(props map[string]any, optional ...string) map[string]any {
	var required []string
	for k := range props {
		if !slices.Contains(optional, k) {
			required = append(required, k)
		}
	}
	slices.Sort(required)
	// Additional properties are refused so the tests catch a field the document misses.
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func arrayOf(items any) map[string]any { return map[string]any{"type": "array", "items": items} }

// pageOf is a page of a keyset-paginated list (pageJSON).
func pageOf(item string) map[string]any {
	return object(map[string]any{
		"items": arrayOf(ref(item)),
		"older": map[string]any{"type": "integer", "format": "int64", "description": "The ?before= of the next, older page; absent on the last one."},
		"newer": map[string]any{"type": "integer", "format": "int64", "description": "The ?after= of the previous, newer page; absent on the first one."},
	}, "older", "newer")
}

// components are the named schemas, each made from the Go type the handlers write.
var components = map[string]reflect.Type{
	"TaskInstanceRow":        reflect.TypeFor[dao.TaskRow](),
	"TaskInstance":           reflect.TypeFor[taskJSON](),
	"TaskInstanceDetail":     reflect.TypeFor[taskDetailJSON](),
	"Attempt":                reflect.TypeFor[attemptJSON](),
	"Checkpoint":             reflect.TypeFor[checkpointJSON](),
	"AgentLoop":              reflect.TypeFor[agentLoopJSON](),
	"AgentTurn":              reflect.TypeFor[turnJSON](),
	"ToolCall":               reflect.TypeFor[callJSON](),
	"TokenUsage":             reflect.TypeFor[tokenUsage](),
	"LogTail":                reflect.TypeFor[dao.LogTail](),
	"TaskLog":                reflect.TypeFor[logJSON](),
	"WorkflowInstance":       reflect.TypeFor[workflowJSON](),
	"WorkflowInstanceDetail": reflect.TypeFor[workflowDetailJSON](),
	"Graph":                  reflect.TypeFor[graph](),
	"RerunResult":            reflect.TypeFor[rerunJSON](),
	"Definition":             reflect.TypeFor[dao.DefinitionSummary](),
	"DefinitionVersionRow":   reflect.TypeFor[dao.DefinitionVersionRow](),
	"DefinitionVersion":      reflect.TypeFor[definitionVersionJSON](),
	"WorkflowParam":          reflect.TypeFor[workflow.ParamView](),
	"Node":                   reflect.TypeFor[nodeJSON](),
	"NodeInfo":               reflect.TypeFor[registry.NodeInfo](),
	"FenceMarker":            reflect.TypeFor[markerJSON](),
	"FenceRecord":            reflect.TypeFor[registry.FenceRecord](),
	"FailoverEvent":          reflect.TypeFor[failoverEventJSON](),
	"StoreServer":            reflect.TypeFor[registry.Member](),
	"Schedule":               reflect.TypeFor[lifecycle.ScheduleJSON](),
	"AuditEvent":             reflect.TypeFor[dao.AuditEvent](),
	"Notification":           reflect.TypeFor[dao.Notification](),
	"Hook":                   reflect.TypeFor[hookJSON](),
	"Triggers":               reflect.TypeFor[triggersJSON](),
	"HookTrigger":            reflect.TypeFor[dao.HookTrigger](),
	"AssetConsumerWaits":     reflect.TypeFor[dao.AssetConsumerWaits](),
	"WaitingSensor":          reflect.TypeFor[sensorWaitJSON](),
	"HookDelivery":           reflect.TypeFor[dao.HookDelivery](),
	"HookDeliveryAnswer":     reflect.TypeFor[hookDeliveryJSON](),
	"Error":                  reflect.TypeFor[errorBody](),
}

// operations are the routes of /api/v1, in the order of routes.
func operations() []operation {
	killed := object(map[string]any{
		"task_instance": positiveID, "state": enumOf(taskStates), "attempt": map[string]any{"type": "integer"},
		"message": str, "worker": map[string]any{"type": []string{"string", "null"}, "description": "The worker asked to stop the attempt."},
	}, "worker")
	return []operation{
		{pattern: "GET /api/v1/definitions", summary: "The workflow definitions by name, a page at a time.",
			query: []param{{"after", "The `next` of the page before: the last name it holds.", str}, limitParam},
			ok: map[int]answer{200: {"A page of definitions.", object(map[string]any{
				"items": arrayOf(ref("Definition")),
				"next":  map[string]any{"type": "string", "description": "The ?after= of the next page; absent on the last one."},
			}, "next")}},
			fails: []int{400}},
		{pattern: "POST /api/v1/definitions", summary: "Store a workflow file as a new version of its definition, unless the latest version is the same.",
			body:      map[string]any{"type": "string", "description": "The workflow file (YAML), as `zksched submit` reads it; see docs/workflow.schema.json."},
			bodyTypes: []string{"application/yaml", "application/x-yaml", "text/yaml", "text/plain", "application/json"},
			ok: map[int]answer{200: {"The stored version (the latest one, if the file is the same).", object(map[string]any{
				"name": str, "version": map[string]any{"type": "integer"},
				"schedule": object(map[string]any{"enabled": map[string]any{"type": "boolean"}, "next_fire_at": map[string]any{"type": []string{"string", "null"}, "format": "date-time"}}),
			}, "schedule")}},
			fails: []int{400, 409, 413, 415}},
		{pattern: "GET /api/v1/definitions/{name}", summary: "A definition's versions, newest first and paged, without their specs.",
			query: []param{beforeParam, afterParam, limitParam},
			ok: map[int]answer{200: {"A page of versions.", func() map[string]any {
				p := pageOf("DefinitionVersionRow")
				p["properties"].(map[string]any)["name"] = str
				p["required"] = append(p["required"].([]string), "name")
				return p
			}()}},
			fails: []int{400, 404}},
		{pattern: "GET /api/v1/definitions/{name}/versions/{version}", summary: "One version of a definition, with its spec.",
			ok:    map[int]answer{200: {"The version.", ref("DefinitionVersion")}},
			fails: []int{400, 404}},
		{pattern: "GET /api/v1/workflow-instances", summary: "Workflow instances, newest first, with their tasks counted by state.",
			query: []param{{"state", "Only instances in this state.", enumOf(workflowStates)},
				{"name", "Only instances of this workflow.", str}, beforeParam, afterParam, limitParam},
			ok:    map[int]answer{200: {"A page of workflow instances.", pageOf("WorkflowInstance")}},
			fails: []int{400}},
		{pattern: "POST /api/v1/workflow-instances", summary: "Submit an instance of a stored definition. With an Idempotency-Key header " +
			"(at most 200 bytes), a retry of the submission with the same key, by the same user within api.hook-dedupe-window, creates nothing " +
			"and answers 200 with the instance the first created.",
			body: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"name"}, "properties": map[string]any{
				"name":     str,
				"version":  map[string]any{"type": "integer", "description": "The definition's version; the latest when 0 or left out."},
				"params":   paramsMap,
				"priority": map[string]any{"type": []string{"integer", "null"}, "description": "The run's priority; the workflow's own when left out."},
			}},
			ok: map[int]answer{201: {"The new instance.", object(map[string]any{
				"id": positiveID, "workflow_name": str, "workflow_version": map[string]any{"type": "integer"},
			})}, 200: {"The instance an earlier submission with the request's Idempotency-Key created; nothing was submitted.", object(map[string]any{
				"id": positiveID, "workflow_name": str, "workflow_version": map[string]any{"type": "integer"}, "replayed": map[string]any{"const": true},
			})}},
			fails: []int{400, 404, 409, 413, 415}},
		{pattern: "GET /api/v1/workflow-instances/{id}", summary: "One workflow instance, with its tasks counted by state (task_states), " +
			"a page of its tasks by id (tasks, with the cursors tasks_next and tasks_prev) and its graph (summarized by layer above 2,000 tasks).",
			query: []param{{"after", "The page of tasks after this task id: the `tasks_next` of the page before.", positiveID},
				{"before", "The page of tasks before this task id: the `tasks_prev` of the page after.", positiveID},
				{"state", "Only the tasks in this state (task_states still counts them all).", enumOf(taskStates)},
				{"limit", "The page's size, 1..1000; 100 by default.", intIn(1, 1000)}},
			ok:    map[int]answer{200: {"The workflow instance.", ref("WorkflowInstanceDetail")}},
			fails: []int{400, 404}},
		{pattern: "POST /api/v1/workflow-instances/{id}/stop", summary: "Stop a workflow instance: its queued tasks are killed, its running ones asked to stop.",
			ok: map[int]answer{200: {"Stopped.", object(map[string]any{
				"workflow_instance": positiveID, "state": enumOf([]dao.WorkflowState{dao.WorkflowStopped}),
				"killed": map[string]any{"type": "integer"}, "kill_requested": map[string]any{"type": "integer"},
			})}},
			fails: []int{400, 404, 409}},
		{pattern: "POST /api/v1/workflow-instances/{id}/rerun", summary: "Rerun a workflow instance from its failed and killed tasks.",
			ok:    map[int]answer{200: {"Requeued.", ref("RerunResult")}},
			fails: []int{400, 404, 409}},
		{pattern: "GET /api/v1/task-instances", summary: "Task instances, newest first.",
			query: []param{{"state", "Only tasks in this state.", enumOf(taskStates)},
				{"workflow", "Only the tasks of this workflow instance.", positiveID},
				{"task", "Only tasks of this name.", str},
				{"worker", "Only tasks of this worker.", str},
				{"from", "Only tasks queued at or after this time.", queryTime},
				{"to", "Only tasks queued at or before this time.", queryTime},
				beforeParam, afterParam, limitParam},
			ok:    map[int]answer{200: {"A page of task instances.", pageOf("TaskInstanceRow")}},
			fails: []int{400}},
		{pattern: "GET /api/v1/task-instances/{id}", summary: "One task instance, with its attempts (and failover explanations), checkpoints, token usage and log tail.",
			ok:    map[int]answer{200: {"The task instance.", ref("TaskInstanceDetail")}},
			fails: []int{400, 404}},
		{pattern: "GET /api/v1/task-instances/{id}/log", summary: "An attempt's log: its end, or from a chunk on, to follow it.",
			query: []param{{"attempt", "The attempt; the latest by default.", map[string]any{"type": "integer", "minimum": 1}},
				{"from_seq", "The chunks from this one on (the `next_seq` of the part before).", intIn(0, 1<<30)},
				{"tail_bytes", "The end of the log, at least this many bytes; 65536 by default.", intIn(1, 64<<20)}},
			ok:    map[int]answer{200: {"Part of the log, with whether its attempt still runs.", ref("TaskLog")}},
			fails: []int{400, 404}},
		{pattern: "POST /api/v1/task-instances/{id}/kill", summary: "Kill a task instance.",
			ok: map[int]answer{
				200: {"Killed before it ran (it was queued).", killed},
				202: {"Kill requested: its worker stops the attempt (or, for a for-each, its items are killed).", killed},
			},
			fails: []int{400, 404, 409}},
		{pattern: "POST /api/v1/task-instances/{id}/rerun", summary: "Rerun a failed or killed task instance.",
			ok:    map[int]answer{200: {"Requeued.", ref("RerunResult")}},
			fails: []int{400, 404, 409}},
		{pattern: "POST /api/v1/task-instances/{id}/signal", summary: "End a waiting task (type: wait) with an output, or resume a paused agent with it.",
			body: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
				"output": str, "fail": map[string]any{"type": "boolean", "description": "Fail the task, with the output as its error."},
			}},
			ok: map[int]answer{200: {"Signalled.", object(map[string]any{
				"task_instance": positiveID, "workflow_instance": positiveID, "state": enumOf(taskStates),
				"paused_step": map[string]any{"type": "string", "description": "The step of a resumed agent the output was given to."},
			}, "paused_step")}},
			fails: []int{400, 404, 409, 413, 415}},
		{pattern: "GET /api/v1/cluster", summary: "The registry in ZooKeeper (leader, masters, workers, fence markers) and recent failovers.",
			ok: map[int]answer{200: {"The cluster.", object(map[string]any{
				"leader":    map[string]any{"type": []string{"string", "null"}},
				"masters":   arrayOf(ref("Node")),
				"workers":   arrayOf(ref("Node")),
				"fenced":    arrayOf(ref("FenceMarker")),
				"failovers": arrayOf(ref("FailoverEvent")),
				"zookeeper": arrayOf(ref("StoreServer")),
				"postgres":  arrayOf(ref("StoreServer")),
			})}},
			fails: []int{400}},
		{pattern: "GET /api/v1/failover-events", summary: "Failover events, newest first.",
			query: []param{{"limit", "How many; 100 by default.", intIn(1, 1000)}},
			ok:    map[int]answer{200: {"The events.", object(map[string]any{"items": arrayOf(ref("FailoverEvent"))})}},
			fails: []int{400}},
		{pattern: "GET /api/v1/schedules", summary: "Every cron schedule with its next fire times.",
			query: []param{{"next", "How many next fire times; 3 by default.", intIn(0, 100)}},
			ok:    map[int]answer{200: {"The schedules.", object(map[string]any{"schedules": arrayOf(ref("Schedule"))})}},
			fails: []int{400}},
		scheduleSwitch("enable"),
		scheduleSwitch("disable"),
		{pattern: "POST /api/v1/schedules/{name}/trigger", summary: "Fire a workflow's schedule now.",
			body: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"params": paramsMap}},
			ok: map[int]answer{201: {"The instance the fire created.", object(map[string]any{
				"id": positiveID, "workflow_name": str, "fire_time": dateTime,
			})}},
			optionalBody: true,
			fails:        []int{400, 404, 409, 413, 415}},
		{pattern: "GET /api/v1/assets", summary: "The assets produced or waited for, with their producers and consumers, and the latest events.",
			ok: map[int]answer{200: {"The assets and the latest events.", object(map[string]any{
				"assets": arrayOf(object(map[string]any{"asset": str, "producers": arrayOf(str), "consumers": arrayOf(str),
					"pending": map[string]any{"type": "integer"}, "last_event_at": map[string]any{"type": []string{"string", "null"}, "format": "date-time"}})),
				"events": arrayOf(object(map[string]any{"id": positiveID, "asset": str, "task_instance": nullID,
					"workflow_instance": nullID, "emitted_by": nullStr, "output": nullStr, "created_at": dateTime})),
			})}}},
		{pattern: "POST /api/v1/assets/{name}/events", summary: "Emit an event of an asset from outside any task: the workflows whose on-assets it completes start.",
			body: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
				"output": map[string]any{"type": "string", "description": "What the consumers' templates read as .assets.NAME.output; at most 65536 bytes."}}},
			ok:           map[int]answer{201: {"The event written.", object(map[string]any{"asset": str, "event": positiveID})}},
			optionalBody: true,
			fails:        []int{400, 413, 415}},
		{pattern: "GET /api/v1/audit-events", summary: "The audit trail, newest first.",
			query: []param{{"actor", "Only events of this user.", str},
				{"action", "Only events of this action.", str},
				{"target", "Only events whose target starts with this.", str},
				{"since", "Only events at or after this time.", queryTime},
				{"until", "Only events at or before this time.", queryTime},
				{"before", "The `next` of the page before.", positiveID},
				{"limit", fmt.Sprintf("The page's size, 1..%d; 50 by default.", dao.MaxAuditPage), intIn(1, dao.MaxAuditPage)}},
			ok: map[int]answer{200: {"A page of events.", object(map[string]any{
				"items": arrayOf(ref("AuditEvent")),
				"next":  map[string]any{"type": "integer", "format": "int64", "description": "The ?before= of the next, older page; absent on the last one."},
			}, "next")}},
			fails: []int{400}},
		{pattern: "GET /api/v1/notifications", summary: "Notifications, newest first, each with its delivery's state, tries, next try and last error.",
			query: []param{{"state", "Only notifications in this state.", map[string]any{"enum": notificationStates}},
				{"before", "The `next` of the page before.", positiveID},
				{"limit", "The page's size, 1..1000; 100 by default.", intIn(1, 1000)}},
			ok: map[int]answer{200: {"A page of notifications.", object(map[string]any{
				"items": arrayOf(ref("Notification")),
				"next":  map[string]any{"type": "integer", "format": "int64", "description": "The ?before= of the next, older page; absent on the last one."},
			}, "next")}},
			fails: []int{400}},
		{pattern: "GET /api/v1/hooks", summary: "Every webhook trigger with its URL, workflow, signature and latest deliveries.",
			ok:    map[int]answer{200: {"The hooks, by name.", object(map[string]any{"items": arrayOf(ref("Hook"))})}},
			fails: []int{400}},
		{pattern: "GET /api/v1/triggers", summary: "What is waiting on what: the webhook triggers with their latest delivery, " +
			"the workflows on-assets starts with the assets they have events of and those they miss, and the sensors waiting now; " +
			"at most 100 of each, newest first.",
			ok:    map[int]answer{200: {"The three lists.", ref("Triggers")}},
			fails: []int{400}},
		{pattern: hookRoute, summary: "A webhook delivery: submits a run of the workflow that declares the hook, " +
			"if its signature is right, its delivery id new and its filter true.",
			body: map[string]any{"description": "Any body the hook's sender posts, JSON or text, at most api.hook-body-limit (1 MiB by default); " +
				"the hook's params and filter read it as .body."},
			bodyTypes: []string{"application/json", "application/x-www-form-urlencoded", "text/plain"},
			ok: map[int]answer{
				201: {"A run was started.", ref("HookDeliveryAnswer")},
				202: {"The hook's filter said no: nothing was started.", ref("HookDeliveryAnswer")},
				200: {"The hook saw this delivery id within api.hook-dedupe-window: nothing was started; workflow_instance_id is the first delivery's run.", ref("HookDeliveryAnswer")},
			},
			fails: []int{400, 404, 409, 413}},
		{pattern: "GET " + openAPIPath, summary: "This document.",
			ok: map[int]answer{200: {"The OpenAPI document of /api/v1.", map[string]any{"type": "object"}}}},
	}
}

func scheduleSwitch(what string) operation {
	return operation{pattern: "POST /api/v1/schedules/{name}/" + what, summary: strings.ToUpper(what[:1]) + what[1:] + " a workflow's schedule.",
		ok: map[int]answer{200: {"The schedule's state.", object(map[string]any{
			"workflow": str, "enabled": map[string]any{"type": "boolean"},
			"next_fire_at": map[string]any{"type": []string{"string", "null"}, "format": "date-time"},
		})}},
		fails: []int{404}}
}

// openAPI returns the document, given the role each route needs.
func openAPI(version string, need map[string]Role) ([]byte, error) {
	paths := map[string]map[string]any{}
	for _, op := range operations() {
		method, path, ok := strings.Cut(op.pattern, " ")
		if !ok {
			return nil, fmt.Errorf("operation %q has no method", op.pattern)
		}
		o := map[string]any{"summary": op.summary, "operationId": operationID(method, path)}
		var params []any
		for _, name := range pathParams(path) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": pathParamSchema(name)})
		}
		for _, p := range op.query {
			params = append(params, map[string]any{"name": p.name, "in": "query", "description": p.doc, "schema": p.schema})
		}
		if params != nil {
			o["parameters"] = params
		}
		if op.body != nil {
			types := op.bodyTypes
			if types == nil {
				types = []string{"application/json"}
			}
			content := map[string]any{}
			for _, t := range types {
				content[t] = map[string]any{"schema": op.body}
			}
			o["requestBody"] = map[string]any{"required": !op.optionalBody, "content": content}
		}
		responses := map[string]any{}
		for status, a := range op.ok {
			responses[fmt.Sprint(status)] = map[string]any{"description": a.doc,
				"content": map[string]any{"application/json": map[string]any{"schema": a.schema}}}
		}
		fails := slices.Clone(op.fails)
		role, routed := need[op.pattern]
		if !routed {
			return nil, fmt.Errorf("operation %s is not a route", op.pattern)
		}
		switch {
		case op.pattern == "GET "+openAPIPath:
			o["security"] = []any{}
		case signed[op.pattern]:
			// No token: the hook's signature (X-Hub-Signature-256, X-Zksched-Signature-256 or
			// a bearer secret) is the credential.
			o["security"] = []any{}
			o["description"] = "Needs no user: the delivery's signature, made with the hook's secret, is the credential " +
				"(see docs/workflows.md, Webhook triggers). 401: a wrong or missing signature; 429: too many wrong signatures from the address."
			fails = append(fails, http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable)
		default:
			o["description"] = fmt.Sprintf("Needs the %s role.", role)
			fails = append(fails, http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable)
			if role != RoleViewer || method != http.MethodGet {
				fails = append(fails, http.StatusForbidden)
			}
		}
		for _, status := range fails {
			responses[fmt.Sprint(status)] = map[string]any{"$ref": fmt.Sprintf("#/components/responses/%d", status)}
		}
		responses["default"] = map[string]any{"$ref": "#/components/responses/default"}
		o["responses"] = responses
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = o
	}

	schemas := map[string]any{}
	for name, t := range components {
		schemas[name] = typeSchema(t)
	}
	errorAnswer := func(doc string) map[string]any {
		return map[string]any{"description": doc, "content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
	}
	responses := map[string]any{"default": errorAnswer("Any other error: 421 for a Host that is not the master's, 431 for headers over 64 KiB, 500.")}
	for status, doc := range failDocs {
		responses[fmt.Sprint(status)] = errorAnswer(doc)
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "zksched API",
			"version":     version,
			"description": "The JSON API of a zksched master. Lists are newest first and paged by cursor. Errors are {\"error\": {\"status\", \"message\"}}.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":   schemas,
			"responses": responses,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "The token of api.token (an admin) or of a user of api.users-file (zksched user add)."}},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// operationID names an operation after its method and path: "get_task-instances_id_log".
func operationID(method, path string) string {
	parts := []string{strings.ToLower(method)}
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/api/v1/"), "/") {
		parts = append(parts, strings.Trim(seg, "{}"))
	}
	return strings.Join(parts, "_")
}

// pathParams are the wildcards of a path, in order.
func pathParams(path string) []string {
	var names []string
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			names = append(names, strings.Trim(seg, "{}"))
		}
	}
	return names
}

func pathParamSchema(name string) map[string]any {
	switch name {
	case "id":
		return positiveID
	case "version":
		return map[string]any{"type": "integer", "minimum": 1}
	}
	return str
}

// typeSchema is the JSON Schema of the JSON encoding/json writes for a value of Go type t; a
// type named in components is referred to by its name.
func typeSchema(t reflect.Type) map[string]any {
	switch t {
	case reflect.TypeFor[time.Time]():
		return dateTime
	case reflect.TypeFor[json.RawMessage]():
		return map[string]any{"description": "Any JSON value."}
	case reflect.TypeFor[dao.EndReason]():
		s := enumOf(dao.EndReasons)
		s["description"] = "Why it ended, when something other than its own result ended it."
		return s
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := componentOr(t.Elem())
		if typ, ok := s["type"].(string); ok {
			if enum, ok := s["enum"].([]string); ok {
				// null is a value of its own, which the enum must list.
				values := make([]any, 0, len(enum)+1)
				for _, v := range enum {
					values = append(values, v)
				}
				s = withType(s, []string{typ, "null"})
				s["enum"] = append(values, nil)
				return s
			}
			return withType(s, []string{typ, "null"})
		}
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Int64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return arrayOf(componentOr(t.Elem()))
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": componentOr(t.Elem())}
	case reflect.Struct:
		props, optional := map[string]any{}, []string{}
		structFields(t, props, &optional)
		return object(props, optional...)
	}
	panic(fmt.Sprintf("api: no JSON Schema for Go type %s", t))
}

// structFields adds the JSON fields of struct t to props, embedded structs' included, and
// the omitempty ones to optional.
func structFields(t reflect.Type, props map[string]any, optional *[]string) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && tag == "" {
			structFields(f.Type, props, optional)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = componentOr(f.Type)
		if strings.Contains(opts, "omitempty") {
			*optional = append(*optional, name)
		}
	}
}

// componentOr refers to t's component if it has one, else returns its schema.
func componentOr(t reflect.Type) map[string]any {
	for name, c := range components {
		if c == t {
			return ref(name)
		}
	}
	return typeSchema(t)
}

func withType(s map[string]any, typ []string) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		out[k] = v
	}
	out["type"] = typ
	return out
}

// apiOpenAPI serves the document.
func (s *Server) apiOpenAPI(w http.ResponseWriter, r *http.Request) error {
	if _, err := newQuery(r.URL.Query()); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, err := w.Write(s.openapi)
	return err
}
