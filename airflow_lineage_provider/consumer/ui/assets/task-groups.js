// Tasks contain their jobs: a job whose run's parent is another job's run (a ``lineage_run`` inside an Airflow
// task) is drawn inside a box labelled with the containing task, which can be collapsed into one node
// (docs/ui.md#tasks-and-their-jobs). This module turns the answer's model into the model drawn: members of
// collapsed groups left out, their edges drawn to the task's node.

/** The graph-model id of a job given as {namespace, name}. */
export function jobId({ namespace, name }) {
  return `job:${namespace}:${name}`;
}

/**
 * The groups of ``model`` (see graph-model.js): containing job id → {id, name, namespace, airflowTask, members}
 * (``members``: positions of the jobs drawn inside it). A job is in its ``parentJob``'s group unless it is an
 * Airflow task itself (its parent is then its DAG run, which the graph does not draw as a box); a job inside a
 * job that is itself a member joins the outer group (one level of boxes).
 */
export function taskGroups(model) {
  const containerOf = (node) => (node.kind === "job" && node.parentJob && !node.airflowTask ? node.parentJob : null);
  const groups = new Map();
  model.nodes.forEach((node, i) => {
    let parent = containerOf(node);
    if (!parent) return;
    const seen = new Set([node.id]);
    for (;;) {
      const at = model.index.get(jobId(parent));
      const outer = at === undefined ? null : containerOf(model.nodes[at]);
      if (!outer || seen.has(jobId(parent))) break;
      seen.add(jobId(parent));
      parent = outer;
    }
    const id = jobId(parent);
    if (!groups.has(id)) {
      groups.set(id, {
        id,
        name: parent.name,
        namespace: parent.namespace,
        airflowTask: parent.airflowTask ?? null,
        members: [],
      });
    }
    groups.get(id).members.push(i);
  });
  return groups;
}

/**
 * The model drawn: ``model`` with the members of the ``collapsed`` groups (ids) left out, each edge to or from one
 * drawn to or from the group's task node (the task's own node when the answer has it, else a node made for it),
 * once. Nodes are copies carrying ``group`` and ``groupName`` (the expanded group they are drawn in, its task's
 * job id and name) or ``tasks`` ({group, count, collapsed}: the node stands for a group); ``groups`` lists the
 * expanded groups {id, name, namespace, airflowTask, task (its node's position or -1), members (positions)} to
 * draw as boxes; ``standsFor`` maps the id of each job left out to the id of the node drawn for it.
 */
export function drawnModel(model, collapsed = new Set()) {
  const groups = taskGroups(model);
  if (!groups.size) return { ...model, groups: [], standsFor: new Map() };
  const memberOf = new Map();
  for (const group of groups.values()) for (const i of group.members) memberOf.set(i, group);
  const nodes = [];
  const position = new Map(); // old position → new
  model.nodes.forEach((node, i) => {
    const group = memberOf.get(i);
    if (group && collapsed.has(group.id)) return;
    const own = groups.get(node.id);
    const copy = { ...node, group: group?.id ?? null, groupName: group?.name ?? null, tasks: null };
    if (own) copy.tasks = { group: own.id, count: own.members.length, collapsed: collapsed.has(own.id) };
    position.set(i, nodes.length);
    nodes.push(copy);
  });
  for (const group of groups.values()) {
    if (!collapsed.has(group.id) || model.index.has(group.id)) continue;
    nodes.push({
      id: group.id,
      kind: "job",
      name: group.name,
      namespace: group.namespace,
      data: { name: group.name, namespace: group.namespace },
      declaredOnly: false,
      renderings: null,
      parentJob: null,
      airflowTask: group.airflowTask,
      synthetic: true,
      group: null,
      groupName: null,
      tasks: { group: group.id, count: group.members.length, collapsed: true },
    });
  }
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const drawnAt = (i) => {
    const group = memberOf.get(i);
    return group && collapsed.has(group.id) ? index.get(group.id) : position.get(i);
  };
  const edges = [];
  const seen = new Map(); // "from>to" → position in edges
  for (const [from, to, declaredOnly] of model.edges) {
    const a = drawnAt(from);
    const b = drawnAt(to);
    if (a === b) continue;
    const key = `${a}>${b}`;
    if (seen.has(key)) {
      const edge = edges[seen.get(key)];
      edge[2] = edge[2] && declaredOnly; // declared only when every edge it stands for is
      continue;
    }
    seen.set(key, edges.length);
    edges.push([a, b, declaredOnly]);
  }
  const drawnGroups = [...groups.values()]
    .filter((group) => !collapsed.has(group.id))
    .map((group) => ({
      ...group,
      task: index.get(group.id) ?? -1,
      members: group.members.map((i) => position.get(i)),
    }));
  const standsFor = new Map();
  for (const [i, group] of memberOf) if (collapsed.has(group.id)) standsFor.set(model.nodes[i].id, group.id);
  return { nodes, edges, index, groups: drawnGroups, standsFor };
}

/**
 * The address of an Airflow task instance in Airflow 3's UI under ``airflowBase`` (``""``: Airflow at the
 * origin's root): ``/dags/{dagId}/runs/{runId}/tasks/{taskId}`` (``/mapped/{mapIndex}`` for a mapped task's
 * instance), or the task's page of its DAG, ``/dags/{dagId}/tasks/{taskId}``, without a run id.
 */
export function airflowTaskUrl(airflowBase, { dagId, taskId, runId, mapIndex }) {
  const part = encodeURIComponent;
  const dag = `${airflowBase}/dags/${part(dagId)}`;
  if (!runId) return `${dag}/tasks/${part(taskId)}`;
  const instance = `${dag}/runs/${part(runId)}/tasks/${part(taskId)}`;
  return Number.isInteger(mapIndex) && mapIndex >= 0 ? `${instance}/mapped/${mapIndex}` : instance;
}

/**
 * Airflow's UI base when the page runs inside Airflow, else null: the page is then served by the plugin under
 * ``<Airflow>/lineage`` with Airflow's session as its credential (``auth`` "airflow", see api.js).
 */
export function airflowBase(base, auth) {
  if (auth !== "airflow") return null;
  return base.replace(/\/lineage\/?$/, "");
}
