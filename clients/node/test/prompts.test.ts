import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, describe, it } from "node:test";
import { Code, MemoryMode } from "../src/index.js";
import { connect, newUser, rejection } from "./helpers.js";

const client = connect();
after(() => client.close());

// Templates and skills are server-wide: unique names keep tests apart.
const unique = (label: string) => `node-${label}-${randomUUID().slice(0, 8)}`;

describe("PromptService", () => {
  it("versions a scenario's template and fills its variables into session-mode builds", async () => {
    const scenario = unique("scenario");
    const v1 = await client.prompts.upsertTemplate({ scenario, systemPrompt: "You write formulas." });
    assert.equal(v1.template?.version, 1);
    assert.equal(v1.template?.enabled, true);
    const v2 = await client.prompts.upsertTemplate({
      scenario,
      systemPrompt: "You write {{language}} formulas for {{app}}.",
    });
    assert.equal(v2.template?.version, 2);
    const listed = await client.prompts.listTemplates({});
    const mine = listed.templates.filter((t) => t.scenario === scenario);
    assert.deepEqual(
      mine.map((t) => [t.version, t.systemPrompt]),
      [[2, "You write {{language}} formulas for {{app}}."]],
    );

    const user = newUser("template");
    const { session } = await client.sessions.createSession({ userId: user, scenario });
    const built = await client.context.buildMessages({
      session: {
        userId: user,
        sessionId: session?.id ?? "",
        variables: { language: "English", app: "Excel" },
        memory: MemoryMode.OFF,
      },
      userMessage: "Sum column B",
      tokenBudget: 2_000,
    });
    assert.match(built.messages[0]?.content ?? "", /You write English formulas for Excel\./);

    await client.prompts.deleteTemplate({ scenario });
    const after = await client.prompts.listTemplates({});
    assert.equal(after.templates.filter((t) => t.scenario === scenario).length, 0);
    await rejection(client.prompts.deleteTemplate({ scenario }), Code.NotFound);
  });

  it("keeps skills per host app and lists them by app and enabled state", async () => {
    const excel = unique("excel-skill");
    const everywhere = unique("any-skill");
    const disabled = unique("off-skill");
    const upserted = await client.prompts.upsertSkill({
      skill: {
        name: excel,
        description: "Formulas",
        prompt: "Prefer XLOOKUP.",
        apps: ["excel"],
        enabled: true,
      },
    });
    assert.deepEqual(upserted.skill?.apps, ["excel"]);
    assert.ok(upserted.skill?.updateTime);
    await client.prompts.upsertSkill({ skill: { name: everywhere, prompt: "Be concise.", enabled: true } });
    await client.prompts.upsertSkill({
      skill: { name: disabled, prompt: "Unused.", apps: ["excel"], enabled: false },
    });

    const names = async (app: string, enabledOnly: boolean) => {
      const listed = await client.prompts.listSkills({ app, enabledOnly });
      const mine = new Set([excel, everywhere, disabled]);
      return listed.skills
        .map((s) => s.name)
        .filter((name) => mine.has(name))
        .sort();
    };
    assert.deepEqual(await names("excel", true), [excel, everywhere].sort());
    assert.deepEqual(await names("excel", false), [excel, everywhere, disabled].sort());
    assert.deepEqual(await names("word", false), [everywhere]);

    for (const name of [excel, everywhere, disabled]) {
      await client.prompts.deleteSkill({ name });
    }
    assert.deepEqual(await names("", false), []);
    await rejection(client.prompts.deleteSkill({ name: excel }), Code.NotFound);
  });
});
