// Minimal Grafana panel builders (plain jsonnet, no grafonnet dependency).
// Every panel and target uses the $datasource variable.
{
  ds:: { type: 'prometheus', uid: '${datasource}' },

  target(expr, legend='', instant=false, format=null)::
    { datasource: $.ds, refId: 'A', expr: expr, legendFormat: if legend == '' then '__auto' else legend }
    + (if instant then { instant: true, range: false } else {})
    + (if format != null then { format: format } else {}),

  // refIds A, B, C... in order, so table overrides can name "Value #B".
  refs(targets):: std.mapWithIndex(function(i, t) t { refId: std.char(65 + i) }, targets),

  timeseries(title, targets, unit='short', description='', thresholds=null, stack=false, min=null, max=null)::
    local custom = {
      drawStyle: 'line',
      lineWidth: 1,
      fillOpacity: 10,
      showPoints: 'never',
      spanNulls: false,
      stacking: { mode: if stack then 'normal' else 'none', group: 'A' },
    } + (if thresholds != null then { thresholdsStyle: { mode: 'dashed' } } else {});
    local steps = [{ color: 'green', value: null }]
                  + (if thresholds != null then [{ color: t[1], value: t[0] } for t in thresholds] else []);
    {
      type: 'timeseries',
      title: title,
      description: description,
      datasource: $.ds,
      targets: $.refs(targets),
      fieldConfig: {
        defaults: { unit: unit, custom: custom, thresholds: { mode: 'absolute', steps: steps } }
                  + (if min != null then { min: min } else {})
                  + (if max != null then { max: max } else {}),
        overrides: [],
      },
      options: {
        legend: { displayMode: 'table', placement: 'bottom', calcs: ['lastNotNull', 'max'] },
        tooltip: { mode: 'multi', sort: 'desc' },
      },
    },

  stat(title, expr, unit='short', description='', thresholds=[[1, 'red']]):: {
    type: 'stat',
    title: title,
    description: description,
    datasource: $.ds,
    targets: [$.target(expr, instant=true)],
    fieldConfig: {
      defaults: {
        unit: unit,
        thresholds: { mode: 'absolute', steps: [{ color: 'green', value: null }] + [{ color: t[1], value: t[0] } for t in thresholds] },
      },
      overrides: [],
    },
    options: {
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'background',
      graphMode: 'none',
      textMode: 'value',
    },
  },

  table(title, targets, description='', hide=['Time', '__name__', 'job'], links=null, overrides=[]):: {
    type: 'table',
    title: title,
    description: description,
    datasource: $.ds,
    targets: $.refs([t { instant: true, range: false, format: 'table' } for t in targets]),
    transformations: [
      { id: 'merge', options: {} },
      { id: 'organize', options: { excludeByName: { [h]: true for h in hide } } },
    ],
    fieldConfig: {
      defaults: { custom: { align: 'auto' } } + (if links != null then { links: links } else {}),
      overrides: overrides,
    },
    options: { showHeader: true, footer: { show: false } },
  },

  // Layout: a list of panel(p, w, h) and row(title) items placed left to right
  // in Grafana's 24-column grid, wrapping; ids in order.
  panel(p, w=12, h=8):: { kind: 'panel', p: p, w: w, h: h },
  row(title):: { kind: 'row', title: title },
  layout(items)::
    local step(st, it) =
      if it.kind == 'row' then
        local y = if st.x > 0 then st.y + st.h else st.y;
        st {
          x: 0,
          y: y + 1,
          h: 0,
          id: st.id + 1,
          panels+: [{ type: 'row', title: it.title, collapsed: false, id: st.id, gridPos: { h: 1, w: 24, x: 0, y: y }, panels: [] }],
        }
      else
        local wrap = st.x + it.w > 24;
        local x = if wrap then 0 else st.x;
        local y = if wrap then st.y + st.h else st.y;
        local h = if wrap then 0 else st.h;
        st {
          x: x + it.w,
          y: y,
          h: std.max(h, it.h),
          id: st.id + 1,
          panels+: [it.p { id: st.id, gridPos: { h: it.h, w: it.w, x: x, y: y } }],
        };
    std.foldl(step, items, { x: 0, y: 0, h: 0, id: 1, panels: [] }).panels,
}
