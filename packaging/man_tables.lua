-- pandoc filter for dlaunch(1): gives every table of docs/dlaunch.md column
-- widths that fit an 80-column terminal.
--
-- GitHub-flavoured tables carry no widths, so pandoc's man writer leaves the
-- columns to tbl, which makes each text column a fixed share of the line
-- (1/(N+1) of it for N columns) whatever it holds: a column narrower than
-- its longest word (an option name, an environment variable) cannot break
-- its lines, and a table of such columns runs past the line. Here each
-- column is at least as wide as its longest word, and the room left is
-- shared out by how much text each column holds. A code span too long for
-- any column (a dotted Python name, a path) may break after its dots and
-- slashes, as a URL does.
--
-- The line: man(1) at 80 columns sets a line length of 78 en and indents
-- section text by 7, which leaves 71; tbl puts 3 en between columns; the man
-- writer turns a width fraction w into w * 70 en.
local LINE = 71
local GAP = 3
local EN_PER_FRACTION = 70
-- A code span longer than this may break after '.' and '/'.
local LONG_CODE = 30

local function len(s)
  return utf8.len(s) or #s
end

-- troff's zero-width break point.
local function break_point()
  return pandoc.RawInline("man", "\\:")
end

-- A long code span as pieces ending at its dots and slashes, with a break
-- point between them; any other span as it is.
local function breakable(code)
  if len(code.text) <= LONG_CODE then return code end
  local out = pandoc.List()
  for piece in code.text:gmatch("[^./]*[./]?") do
    if piece ~= "" then
      if #out > 0 then out:insert(break_point()) end
      out:insert(pandoc.Code(piece))
    end
  end
  return out
end

-- The cell's length and its longest run of characters troff cannot break
-- (it breaks at spaces and break points only: the page is never hyphenated).
local function measure_cell(cell)
  local total, longest, word = 0, 0, 0
  local function add(text)
    for ch in text:gmatch(utf8.charpattern) do
      total = total + 1
      if ch:match("%s") then word = 0 else word = word + 1 end
      longest = math.max(longest, word)
    end
  end
  local function stop() word = 0; total = total + 1 end
  for _, block in ipairs(cell.contents) do
    pandoc.walk_block(block, {
      Str = function(s) add(s.text) end,
      Code = function(c) add(c.text) end,
      Space = stop, SoftBreak = stop, LineBreak = stop,
      RawInline = function() word = 0 end,
    })
    stop()
  end
  return total, longest
end

-- Every row of the table: its head's and each body's.
local function rows(t)
  local all = {}
  for _, r in ipairs(t.head.rows) do table.insert(all, r) end
  for _, body in ipairs(t.bodies) do
    for _, r in ipairs(body.head) do table.insert(all, r) end
    for _, r in ipairs(body.body) do table.insert(all, r) end
  end
  return all
end

-- Per column: the longest word (the least width that breaks cleanly) and
-- the length of its text, summed over the rows.
local function measure(t)
  local need, text = {}, {}
  for i = 1, #t.colspecs do need[i], text[i] = 1, 0 end
  for _, r in ipairs(rows(t)) do
    local col = 1
    for _, cell in ipairs(r.cells) do
      if col <= #t.colspecs then
        local total, longest = measure_cell(cell)
        need[col] = math.max(need[col], longest)
        text[col] = text[col] + total
      end
      col = col + cell.col_span
    end
  end
  return need, text
end

function Table(t)
  t = pandoc.walk_block(t, {Code = breakable})
  local n = #t.colspecs
  local need, text = measure(t)
  local room = LINE - GAP * (n - 1)
  local spare, total_text = room, 0
  for i = 1, n do
    spare = spare - need[i]
    total_text = total_text + text[i]
  end
  if spare < 0 then
    io.stderr:write(string.format("man_tables.lua: a table's longest words need %d columns, more than %d\n",
                                  room - spare, room))
    spare = 0
  end
  -- Whole ens (a terminal rounds each column up to whole characters, and
  -- fractions would add up past the line); what rounding leaves goes to the
  -- column with the most text.
  local widths, used, most = {}, 0, 1
  for i = 1, n do
    local share = total_text > 0 and spare * text[i] / total_text or spare / n
    widths[i] = math.floor(need[i] + share)
    used = used + widths[i]
    if text[i] > text[most] then most = i end
  end
  widths[most] = widths[most] + math.max(0, room - used)
  for i = 1, n do
    t.colspecs[i] = {t.colspecs[i][1], widths[i] / EN_PER_FRACTION}
  end
  return t
end
