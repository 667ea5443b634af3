-- Create the simulated ALSA cards (sim/cards) as api.alsa.acp.device objects with the properties
-- the stock monitor (monitors/alsa.lua, WirePlumber 0.4) gives a udev card, and their nodes the
-- way it names them, so ACP and WirePlumber's own policies run unmodified.
-- Arguments: cards = { { card = N, name = "sim-laptop", props = { ... } }, ... },
-- rules and properties = the stock alsa_monitor.rules / .properties.
local config = ... or {}
config.properties = config.properties or {}

-- The stock monitor's rules (e.g. api.alsa.use-acp, api.acp.auto-profile) apply here too.
local rules = {}
for _, r in ipairs(config.rules or {}) do
  local interests = {}
  for _, i in ipairs(r.matches or {}) do
    local desc = { type = "properties" }
    for _, c in ipairs(i) do
      c.type = "pw"
      table.insert(desc, Constraint(c))
    end
    table.insert(interests, Interest(desc))
  end
  table.insert(rules, { interests = interests, apply = r.apply_properties })
end

local function applyRules(properties)
  for _, r in ipairs(rules) do
    if r.apply then
      for _, interest in ipairs(r.interests) do
        if interest:matches(properties) then
          for k, v in pairs(r.apply) do
            properties[k] = v
          end
        end
      end
    end
  end
end

local function nonempty(s)
  return s ~= "" and s or nil
end

-- As the stock monitor's createNode: priorities, names, nick and description.
local function createNode(parent, id, obj_type, factory, properties)
  local dev_props = parent.properties
  properties["device.id"] = parent["bound-id"]
  properties["factory.name"] = factory
  properties["node.pause-on-idle"] = false

  local dev = properties["api.alsa.pcm.device"] or properties["alsa.device"] or "0"
  local subdev = properties["api.alsa.pcm.subdevice"] or properties["alsa.subdevice"] or "0"
  local stream = properties["api.alsa.pcm.stream"] or "unknown"
  local profile = properties["device.profile.name"] or (stream .. "." .. dev .. "." .. subdev)
  local profile_desc = properties["device.profile.description"]

  if not properties["priority.driver"] then
    local priority = (dev == "0") and 1000 or 744
    if stream == "capture" then
      priority = priority + 1000
    end
    priority = priority - (tonumber(dev) * 16) - tonumber(subdev)
    if profile:find("^analog%-") then
      priority = priority + 9
    elseif profile:find("^iec958%-") then
      priority = priority + 8
    end
    properties["priority.driver"] = priority
    properties["priority.session"] = priority
  end

  if not properties["media.class"] then
    properties["media.class"] = (stream == "capture") and "Audio/Source" or "Audio/Sink"
  end

  if not properties["node.name"] then
    local name = (stream == "capture" and "alsa_input" or "alsa_output") .. "." ..
        dev_props["device.name"]:gsub("^alsa_card%.(.+)", "%1") .. "." .. profile
    properties["node.name"] = name:gsub("([^%w_%-%.])", "_")
  end

  local nick = nonempty(properties["node.nick"]) or nonempty(properties["api.alsa.pcm.name"])
      or nonempty(properties["alsa.name"]) or nonempty(profile_desc) or dev_props["device.nick"]
  properties["node.nick"] = (nick or ""):gsub("(:)", " ")

  if not properties["node.description"] then
    local desc = nonempty(dev_props["device.description"]) or "unknown"
    local name = nonempty(properties["api.alsa.pcm.name"]) or nonempty(properties["api.alsa.pcm.id"]) or dev
    if profile_desc then
      desc = desc .. " " .. profile_desc
    elseif subdev ~= "0" then
      desc = desc .. " (" .. name .. " " .. subdev .. ")"
    elseif dev ~= "0" then
      desc = desc .. " (" .. name .. ")"
    end
    properties["node.description"] = desc:gsub("(:)", " ")
  end

  for k, v in pairs(dev_props) do
    if k:find("^api%.alsa%.card%..*") then
      properties[k] = v
    end
  end

  applyRules(properties)
  if properties["node.disabled"] then
    return
  end
  local node = Node("adapter", properties)
  node:activate(Feature.Proxy.BOUND)
  parent:store_managed_object(id, node)
end

-- Kept alive here: a SpaDevice that is garbage-collected disappears from the graph.
devices = {}

for _, card in ipairs(config.cards or {}) do
  -- What the udev enumerator (api.alsa.enum.udev) reports for a card, then what the stock
  -- monitor's prepareDevice adds.
  local p = {
    ["device.api"] = "alsa",
    ["device.enum.api"] = "udev",
    ["media.class"] = "Audio/Device",
    ["api.alsa.path"] = "hw:" .. card.card,
    ["api.alsa.card"] = tostring(card.card),
    ["device.name"] = "alsa_card." .. card.name,
  }
  for k, v in pairs(card.props or {}) do
    p[k] = v
  end
  if not p["device.description"] then
    if p["device.form-factor"] == "internal" then
      p["device.description"] = I18n.gettext("Built-in Audio")
    else
      p["device.description"] = p["device.product.name"] or p["api.alsa.card.name"] or "Unknown device"
    end
  end
  p["device.nick"] = p["device.nick"] or p["api.alsa.card.name"]
  if not p["device.icon-name"] then
    local icons = { headset = "audio-headset", tv = "video-display", handset = "phone" }
    local b = p["device.bus"]
    p["device.icon-name"] = (icons[p["device.form-factor"]] or "audio-card") .. "-analog" ..
        (b and ("-" .. b) or "")
  end
  applyRules(p)
  local factory = p["api.alsa.use-acp"] and "api.alsa.acp.device" or "api.alsa.pcm.device"
  local device = SpaDevice(factory, p)
  if device then
    device:connect("create-object", createNode)
    device:activate(Feature.SpaDevice.ENABLED | Feature.Proxy.BOUND)
    table.insert(devices, device)
  else
    Log.warning("routectl-sim: failed to create " .. p["device.name"])
  end
end
