"""Deterministic memory texts and queries for bench/memory_search.py.

Short facts about a user, as a memory writer would extract them from chats: mostly Chinese,
some English, some mixed ("我用 VS Code 写 Python"), with numbers, names and places. Every
text comes from a seeded ``random.Random``; nothing is downloaded.
"""

from __future__ import annotations

import random
from collections.abc import Callable


def _w(text: str) -> tuple[str, ...]:
    return tuple(text.split("|"))


DRINKS = _w("咖啡|绿茶|红茶|豆浆|牛奶|橙汁|拿铁|美式咖啡|乌龙茶|柠檬水")
FOODS = _w("火锅|饺子|寿司|披萨|面条|烤鸭|小笼包|麻辣烫|沙拉|牛排|汉堡|螺蛳粉|煎饼|包子")
CITIES = _w("北京|上海|广州|深圳|杭州|成都|武汉|南京|西安|重庆|苏州|天津|厦门|青岛")
DISTRICTS = _w("朝阳区|海淀区|浦东新区|徐汇区|天河区|南山区|西湖区|武侯区|鼓楼区|雁塔区")
COMPANIES = _w("阿里巴巴|腾讯|字节跳动|华为|小米|一家创业公司|银行|医院|学校|律师事务所|咨询公司")
JOBS = _w("产品经理|软件工程师|设计师|数据分析师|会计|老师|医生|销售|运营|律师|测试工程师")
ALLERGENS = _w("花生|海鲜|牛奶|花粉|青霉素|猫毛|芒果|鸡蛋|小麦")
PETS = _w("猫|狗|兔子|仓鼠|鹦鹉|金鱼|柯基|橘猫")
PET_NAMES = _w("小白|豆豆|旺财|咪咪|球球|Lucky|Max|年糕|可乐|布丁")
RELATIONS = _w("妻子|丈夫|女儿|儿子|妈妈|爸爸|同事|老板|室友|导师")
PEOPLE = _w("张伟|王芳|李娜|刘洋|陈静|杨帆|赵磊|黄敏|Tom|Anna|David|Lisa")
HOBBIES = _w("爬山|跑步|游泳|看电影|打篮球|弹钢琴|读书|摄影|钓鱼|骑自行车|打羽毛球|做饭|露营|画画")
SKILLS = _w("日语|英语|Python|吉他|机器学习|烹饪|法语|Rust|摄影|德语|Kubernetes")
TOOLS = _w("VS Code|Vim|PyCharm|Emacs|Cursor|IntelliJ")
LANGS = _w("Python|Go|Java|TypeScript|Rust|C++|Kotlin|SQL")
CARS = _w("特斯拉|比亚迪|丰田|本田|大众|蔚来|理想")
APPS = _w("Notion|Obsidian|印象笔记|OneNote|飞书文档|语雀")
WHEN = _w("|最近|从去年开始|一直|周末|工作日|每天|经常|偶尔|以前")

DRINKS_EN = _w(
    "coffee|green tea|black tea|soy milk|orange juice|latte|espresso|oolong tea|"
    "lemon water|hot chocolate"
)
FOODS_EN = _w("hot pot|dumplings|sushi|pizza|noodles|steak|burgers|salad|ramen|tacos|curry")
CITIES_EN = _w(
    "Beijing|Shanghai|Shenzhen|Hangzhou|Tokyo|Singapore|London|Berlin|Seattle|Toronto|Sydney|Paris"
)
JOBS_EN = _w(
    "product manager|software engineer|designer|data analyst|accountant|teacher|doctor|"
    "lawyer|nurse|researcher"
)
COMPANIES_EN = _w(
    "a startup|a bank|a hospital|a university|Google|Microsoft|a consulting firm|an airline"
)
ALLERGENS_EN = _w("peanuts|shellfish|milk|pollen|penicillin|cats|mango|eggs|gluten")
PETS_EN = _w("cat|dog|rabbit|hamster|parrot|goldfish|corgi")
RELATIONS_EN = _w("wife|husband|daughter|son|mother|father|manager|roommate|sister|brother")
HOBBIES_EN = _w(
    "hiking|running|swimming|watching movies|playing basketball|playing the piano|"
    "reading novels|photography|fishing|cycling|camping|painting"
)
MONTHS_EN = _w(
    "January|February|March|April|May|June|July|August|September|October|November|December"
)

Maker = Callable[[random.Random], str]

# Details and time qualifiers a memory writer adds: they make texts of one kind differ.
DETAILS_ZH = _w(
    "不加糖|这是上周聊天时提到的|最好提醒我一下|和家人一起|已经坚持很久了|但最近有点忙|希望以后也能保持|朋友推荐的|价格有点贵|感觉很放松|周一到周五|下雨天除外|"
    "出差的时候也一样|医生建议的|打算明年换一个|和同事约好了|记得带上充电器|每次大概一个小时|主要是为了健康|孩子也喜欢|去年开始的习惯|不喜欢太甜的|经常在地铁上|"
    "需要提前预约|预算大概五百元|喜欢安静的地方|晚上九点以后|不要推荐太远的|对颜色没有要求|周末会多一些"
)
DETAILS_EN = _w(
    "no sugar please|mentioned last week|remind me about it|with my family|for years now|"
    "though I have been busy lately|a friend recommended it|it is a bit expensive|"
    "it helps me relax|on weekdays only|except when it rains|even when travelling|"
    "my doctor suggested it|thinking of changing next year|together with colleagues|"
    "usually for about an hour|mostly for health reasons|my kids like it too|"
    "started last year|not too sweet|on the subway|needs booking in advance|"
    "budget around 500 dollars|prefer quiet places|after 9 pm|nothing too far away|"
    "any colour is fine|more on weekends"
)
PREFIX_ZH = _w("|||2023年起，|去年|从3月开始，|今年|最近几个月|上个月起，")
PREFIX_EN = _w("|||Since 2023, |Lately, |These days |Update: |Note: ")


_TEMPLATES: tuple[Maker, ...] = (
    lambda r: f"我{r.choice(WHEN)}早上都喝{r.choice(DRINKS)}",
    lambda r: f"我{r.choice(WHEN)}喜欢吃{r.choice(FOODS)}，尤其是{r.choice(CITIES)}的",
    lambda r: f"我不吃{r.choice(FOODS)}，{r.choice(('太辣了', '在减肥', '吃腻了', '不健康'))}",
    lambda r: f"我住在{r.choice(CITIES)}{r.choice(DISTRICTS)}，离公司{r.randint(1, 40)}公里",
    lambda r: f"我在{r.choice(COMPANIES)}做{r.choice(JOBS)}，已经{r.randint(1, 15)}年了",
    lambda r: f"我对{r.choice(ALLERGENS)}过敏",
    lambda r: f"我养了一只{r.choice(PETS)}，叫{r.choice(PET_NAMES)}，{r.randint(1, 14)}岁",
    lambda r: f"我的{r.choice(RELATIONS)}叫{r.choice(PEOPLE)}，在{r.choice(CITIES)}工作",
    lambda r: f"我{r.choice(WHEN)}喜欢{r.choice(HOBBIES)}",
    lambda r: f"我正在学习{r.choice(SKILLS)}，每周{r.randint(1, 7)}次课",
    lambda r: f"我用 {r.choice(TOOLS)} 写 {r.choice(LANGS)} 代码",
    lambda r: f"我的生日是{r.randint(1, 12)}月{r.randint(1, 28)}日",
    lambda r: f"我开的车是{r.choice(CARS)}，{r.randint(2015, 2025)}年买的",
    lambda r: f"{r.randint(1, 12)}月{r.randint(1, 28)}日要去{r.choice(CITIES)}出差",
    lambda r: f"我习惯用{r.choice(APPS)}记笔记",
    lambda r: f"我每个月房租{r.randint(20, 120) * 100}元",
    lambda r: f"我的航班号是{r.choice(('CA', 'MU', 'CZ', 'HU'))}{r.randint(100, 9999)}",
    lambda r: (
        f"项目{r.choice(('A', 'B', 'X', 'Alpha', 'Nova'))}-{r.randint(1, 999)}的截止日期是"
        f"{r.randint(1, 12)}月{r.randint(1, 28)}日"
    ),
    lambda r: f"我的 GitHub 用户名是 {r.choice(PEOPLE).lower()}{r.randint(1, 9999)}",
    lambda r: (
        f"开会用 {r.choice(('Zoom', 'Teams', '腾讯会议', '飞书'))}，"
        f"时间一般是下午{r.randint(1, 6)}点"
    ),
    lambda r: f"I drink {r.choice(DRINKS_EN)} every morning",
    lambda r: f"My favorite food is {r.choice(FOODS_EN)}, especially in {r.choice(CITIES_EN)}",
    lambda r: f"I live in {r.choice(CITIES_EN)}, about {r.randint(1, 40)} km from the office",
    lambda r: (
        f"I work as a {r.choice(JOBS_EN)} at {r.choice(COMPANIES_EN)} since {r.randint(2005, 2025)}"
    ),
    lambda r: f"I am allergic to {r.choice(ALLERGENS_EN)}",
    lambda r: (
        f"I have a {r.choice(PETS_EN)} named {r.choice(PET_NAMES)}, {r.randint(1, 14)} years old"
    ),
    lambda r: f"My {r.choice(RELATIONS_EN)} is called {r.choice(PEOPLE)}",
    lambda r: f"On weekends I like {r.choice(HOBBIES_EN)}",
    lambda r: f"I'm learning {r.choice((*SKILLS[1::2], 'Spanish', 'Japanese', 'guitar'))}",
    lambda r: f"I prefer {r.choice(TOOLS)} for {r.choice(LANGS)} projects",
    lambda r: f"My birthday is on {r.choice(MONTHS_EN)} {r.randint(1, 28)}",
    lambda r: f"I usually go to bed at {r.randint(9, 12)} pm and wake up at {r.randint(5, 8)}",
    lambda r: (
        f"Planning a trip to {r.choice(CITIES_EN)} in {r.choice(MONTHS_EN)} {r.randint(2024, 2027)}"
    ),
    lambda r: (
        f"我的 {r.choice(('MacBook', 'ThinkPad', 'iPhone', 'Pixel'))} 是"
        f"{r.randint(2018, 2025)}年买的，{r.choice(('16GB', '32GB', '8GB'))}内存"
    ),
    lambda r: (
        f"Prefers answers in {r.choice(('中文', 'English', '中英双语'))}, "
        f"{r.choice(('short', 'detailed', 'with examples', 'with code'))}"
    ),
)


def _memory(rng: random.Random) -> str:
    text = rng.choice(_TEMPLATES)(rng)
    if text.isascii():
        if rng.random() < 0.6:
            text += ", " + rng.choice(DETAILS_EN)
        return rng.choice(PREFIX_EN) + text
    if rng.random() < 0.6:
        text += "，" + rng.choice(DETAILS_ZH)
    return rng.choice(PREFIX_ZH) + text


def memory_texts(n: int, seed: int = 20261122) -> list[str]:
    """``n`` distinct memory texts."""
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    while len(seen) < n:
        seen[_memory(rng)] = None
    return list(seen)


# Queries: two-character Chinese words, single English words, short phrases, and a few
# words no memory contains.
QUERIES_ZH2 = _w(
    "咖啡|绿茶|豆浆|牛奶|火锅|饺子|寿司|烤鸭|北京|上海|深圳|杭州|成都|重庆|过敏|花生|海鲜|花粉|芒果|宠物|兔子|仓鼠|鹦鹉|金鱼|柯基|妻子|女儿|老板|"
    "同事|导师|爬山|跑步|游泳|电影|钢琴|摄影|钓鱼|露营|日语|法语|德语|烹饪|吉他|代码|生日|出差|笔记|房租|航班|截止|开会|内存|公司|工作|周末|早上|"
    "减肥|健康|医院|银行|腾讯|华为|小米|特斯|蔚来|理想|量子|火箭|考研|婚礼"
)
QUERIES_EN = _w(
    "coffee|tea|latte|espresso|sushi|pizza|ramen|tacos|curry|Tokyo|London|Berlin|Seattle|"
    "Singapore|allergic|peanuts|gluten|penicillin|dog|cat|parrot|corgi|wife|daughter|"
    "manager|hiking|swimming|piano|photography|cycling|Python|Rust|Kotlin|Vim|Emacs|"
    "birthday|March|December|trip|office|startup|lawyer|Japanese|Spanish|guitar|morning|"
    "weekends|Zoom|GitHub|MacBook|quantum|zebra|violin|Kubernetes"
)
QUERIES_PHRASE = _w(
    "喝咖啡|喝绿茶|喜欢吃火锅|住在上海|住在北京|对花生过敏|海鲜过敏|养了一只猫|"
    "我的女儿|周末爬山|学习日语|写代码|用 Vim 写 Go|生日是几月|去成都出差|房租多少|"
    "航班号|截止日期|开会时间|哪一年买的车|笔记软件|drink coffee|favorite food|"
    "allergic to peanuts|named Lucky|trip to Tokyo|software engineer|go to bed|"
    "Python projects|my wife|learning Japanese|what do I drink in the morning|"
    "where do I live|PyCharm for Rust|hot pot|我喜欢 sushi|Notion 笔记|iPhone 内存|"
    "answers in English|中文回答|我每天早上都喝咖啡|我对什么过敏|宠物叫什么名字"
)


def queries(n: int, seed: int = 7) -> list[str]:
    """``n`` queries drawn from the three kinds (about 40% Chinese words, 35% English, rest
    phrases), every listed query at least once when ``n`` allows."""
    pool = [*QUERIES_ZH2, *QUERIES_EN, *QUERIES_PHRASE]
    rng = random.Random(seed)
    out = list(pool[:n])
    while len(out) < n:
        out.append(rng.choice(pool))
    rng.shuffle(out)
    return out
